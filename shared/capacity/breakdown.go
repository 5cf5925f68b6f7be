package capacity

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
)

// Breakdown is what a replay's messages took, per message: write units at
// 1x (each item and index entry written once, as the issue counts them)
// and as billed (a transaction's base-table items twice), split between
// the base table and the indexes, and by operation and kind of key.
type Breakdown struct {
	Messages                int
	Write1x, WriteBilled    float64 // per message
	BaseWrite1x, IndexWrite float64 // per message, at 1x
	Read                    float64 // per message, the sweep's apart
	Operations              map[string][2]float64
	KeyWrites, KeyReads     map[string]float64 // per message, by "index pattern"
	WriteCalls              float64            // write calls per message
}

// Break computes the breakdown of what c counted.
func Break(c Counted) Breakdown {
	m := float64(c.Messages)
	b := Breakdown{Messages: c.Messages, Operations: map[string][2]float64{}, KeyWrites: map[string]float64{}, KeyReads: map[string]float64{}}
	var base, index, sweepRead float64
	for p, u := range c.Usage.Partitions {
		k := strings.TrimSpace(p.Index + " " + Pattern(p.Key))
		if p.Index == "" {
			base += u.Write
			k = "table " + k
		} else {
			index += u.Write
		}
		if strings.HasPrefix(p.Key, "OUTBOX#DUE#") {
			sweepRead += u.Read
			u.Read = 0
		}
		b.KeyWrites[k] += u.Write / m
		b.KeyReads[k] += u.Read / m
	}
	b.WriteBilled = (base + index) / m
	b.BaseWrite1x = (base - c.Usage.TxSurcharge) / m
	b.IndexWrite = index / m
	b.Write1x = b.BaseWrite1x + b.IndexWrite
	b.Read = (c.Usage.Total().Read - sweepRead) / m
	for op, u := range c.Usage.Operations {
		b.Operations[op] = [2]float64{u.Write / m, u.Read / m}
	}
	for op, n := range c.Usage.Calls {
		switch op {
		case "PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems":
			b.WriteCalls += float64(n) / m
		}
	}
	return b
}

// Print writes the breakdown as text.
func (b Breakdown) Print(w io.Writer) {
	fmt.Fprintf(w, "Per message (%d messages): %.2f write units at 1x (%.2f base table, %.2f indexes), %.2f as billed; %.2f read units (the sweep's apart); %.2f write calls\n\n",
		b.Messages, b.Write1x, b.BaseWrite1x, b.IndexWrite, b.WriteBilled, b.Read, b.WriteCalls)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "OPERATION\tWRITE UNITS/MSG (billed)\tREAD UNITS/MSG")
	ops := make([]string, 0, len(b.Operations))
	for op := range b.Operations {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	for _, op := range ops {
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\n", op, b.Operations[op][0], b.Operations[op][1])
	}
	fmt.Fprintln(tw, "\t\t")
	fmt.Fprintln(tw, "KEY (table or index, pattern)\tWRITE UNITS/MSG (billed)\tREAD UNITS/MSG")
	keys := make([]string, 0, len(b.KeyWrites))
	for k := range b.KeyWrites {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if b.KeyWrites[keys[i]] != b.KeyWrites[keys[j]] {
			return b.KeyWrites[keys[i]] > b.KeyWrites[keys[j]]
		}
		return keys[i] < keys[j]
	})
	for _, k := range keys {
		if b.KeyWrites[k] > 0 || b.KeyReads[k] > 0 {
			fmt.Fprintf(tw, "%s\t%.2f\t%.2f\n", k, b.KeyWrites[k], b.KeyReads[k])
		}
	}
	tw.Flush()
}
