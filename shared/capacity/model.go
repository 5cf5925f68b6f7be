package capacity

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// DynamoDB's per-partition limits: a partition key takes at most this many
// units per second (adaptive capacity isolates a hot key on a partition of
// its own, never beyond them).
const (
	PartitionWCU = 1000
	PartitionRCU = 3000
)

// secondsPerMonth is 30 days.
const secondsPerMonth = 30 * 24 * 3600

// Load is the traffic to model.
type Load struct {
	MessagesPerSecond     float64
	Bots, Conversations   int
	TableQueriesPerSecond float64
}

// KeyAt is one kind of partition key at the load's rate.
type KeyAt struct {
	KeyHeat
	// PeakWCU and PeakRCU are the hottest key's units per second.
	PeakWCU, PeakRCU float64
}

// Estimate is the capacity model of a load.
type Estimate struct {
	Load        Load
	Assumptions Assumptions
	Prices      Prices
	// Per message written (the sweep's reads apart).
	WritePerMessage, ReadPerMessage float64
	DeliveriesPerMessage            float64
	APICallsPerMessage              float64
	// SweepReadsPerMinute: the periodic sweep of the outbox's sweep index
	// (one eventually consistent Query per bucket, each about empty).
	SweepReadsPerMinute float64
	Keys                []KeyAt
	// Ceiling is the message rate at which the hottest partition key
	// reaches PartitionWCU; Hottest names it. ReadCeiling and HottestRead
	// are the same for PartitionRCU (the replay calls with one token of
	// one workspace: those keys are read on every call).
	Ceiling, ReadCeiling float64
	Hottest, HottestRead string
	// CeilingOneOutbox is the same with every outbox shard's writes on one
	// key, as the previous layout (OUTBOX) had them.
	CeilingOneOutbox float64
	// Lambda concurrency at the load.
	APIConcurrency, DispatcherConcurrency float64
	// Cost per million messages, by service, and per month at the load
	// (DynamoDB on demand).
	CostPerMillion map[string]float64
	Monthly        float64
	// DynamoWriteUnits and DynamoReadUnits are the capacity units a
	// million messages take (indexes, table queries and the sweep
	// included); ProvisionedDynamoDB is their cost per million messages
	// with the table provisioned at Assumptions.Utilization
	// (provisioned.go).
	DynamoWriteUnits, DynamoReadUnits float64
	ProvisionedDynamoDB               float64
	// Replayed is how the replay's shape compares to the load's (keys
	// of conversations and bots scaled when the replay was smaller).
	Replayed Shape
}

// Model turns what a replay counted into the estimate of load.
func Model(c Counted, load Load, a Assumptions, pr Prices) Estimate {
	e := Estimate{Load: load, Assumptions: a, Prices: pr, Replayed: c.Shape}
	msgs := float64(c.Messages)
	var sweepRead float64
	for p, u := range c.Usage.Partitions {
		if strings.HasPrefix(p.Key, "OUTBOX#DUE#") {
			sweepRead += u.Read
		}
	}
	t := c.Usage.Total()
	e.WritePerMessage = t.Write / msgs
	e.ReadPerMessage = (t.Read - sweepRead) / msgs
	e.DeliveriesPerMessage = float64(c.Deliveries) / msgs
	e.APICallsPerMessage = float64(c.APICalls) / msgs
	e.SweepReadsPerMinute = 64 * 0.5
	// A key of one conversation (or bot) of the replay stands for one of
	// the load: its share of the traffic is 1/conversations (1/bots).
	convScale := float64(c.Shape.Conversations) / float64(max(load.Conversations, 1))
	botScale := float64(c.Shape.Bots) / float64(max(load.Bots, 1))
	scale := func(pattern string) float64 {
		switch {
		case strings.Contains(pattern, "<conv>") || strings.Contains(pattern, "<user>") || strings.Contains(pattern, "<msg>") || strings.Contains(pattern, "<evt>") || strings.Contains(pattern, "<dlv>"):
			return convScale
		case strings.Contains(pattern, "<bot>"):
			return botScale
		}
		return 1
	}
	var outboxWrite float64
	hottest, hottestRead := 0.0, 0.0
	for _, h := range Heat(c.Usage) {
		k := KeyAt{KeyHeat: h}
		if strings.HasPrefix(h.Pattern, "OUTBOX#DUE#") {
			k.MaxRead = 0 // the sweep's, per minute
		}
		f := scale(h.Pattern)
		k.PeakWCU = h.MaxWrite / msgs * load.MessagesPerSecond * f
		k.PeakRCU = k.MaxRead / msgs * load.MessagesPerSecond * f
		if h.Table && strings.HasPrefix(h.Pattern, "OUTBOX#") && !strings.HasPrefix(h.Pattern, "OUTBOX#DUE#") {
			outboxWrite += h.Write
		}
		if w := h.MaxWrite * f / msgs / PartitionWCU; w > hottest {
			hottest, e.Hottest = w, strings.TrimSpace(h.Index+" "+h.Pattern)
		}
		if r := k.MaxRead * f / msgs / PartitionRCU; r > hottestRead {
			hottestRead, e.HottestRead = r, strings.TrimSpace(h.Index+" "+h.Pattern)
		}
		e.Keys = append(e.Keys, k)
	}
	if hottest > 0 {
		e.Ceiling = 1 / hottest
	}
	if hottestRead > 0 {
		e.ReadCeiling = 1 / hottestRead
	}
	if outboxWrite > 0 {
		e.CeilingOneOutbox = PartitionWCU / (outboxWrite / msgs)
	}
	// Table queries: their own read units, their partition's heat.
	tableReadPerQuery := 0.0
	if q := c.Shape.TableQueries; q > 0 {
		tableReadPerQuery = c.TableQuery.Total().Read / float64(q)
		for _, h := range Heat(c.TableQuery) {
			if h.MaxRead == 0 {
				continue
			}
			h.Pattern += " (table queries)"
			e.Keys = append(e.Keys, KeyAt{KeyHeat: h, PeakRCU: h.MaxRead / float64(q) * load.TableQueriesPerSecond})
		}
	}
	rate := load.MessagesPerSecond
	e.APIConcurrency = rate * e.APICallsPerMessage * a.APIMillis / 1000
	e.DispatcherConcurrency = rate * e.DeliveriesPerMessage * a.DeliveryMillis / 1000

	// Per million messages.
	const M = 1e6
	tableQueriesPerMillion := 0.0
	if rate > 0 {
		tableQueriesPerMillion = load.TableQueriesPerSecond / rate * M
	}
	sweepPerMillion := 0.0
	if rate > 0 {
		sweepPerMillion = e.SweepReadsPerMinute / 60 / rate * M
	}
	apiCalls := e.APICallsPerMessage*M + tableQueriesPerMillion
	deliveries := e.DeliveriesPerMessage * M
	invocations := apiCalls + deliveries/a.DeliveriesPerInvocation
	gbSeconds := apiCalls*a.APIMillis/1000*a.APIMemoryMB/1024 + deliveries*a.DeliveryMillis/1000*a.DispatcherMemoryMB/1024
	e.DynamoWriteUnits = e.WritePerMessage * M
	e.DynamoReadUnits = e.ReadPerMessage*M + tableReadPerQuery*tableQueriesPerMillion + sweepPerMillion
	e.ProvisionedDynamoDB = ProvisionedDynamo(e.DynamoWriteUnits, e.DynamoReadUnits, a.Utilization, pr)
	e.CostPerMillion = map[string]float64{
		"DynamoDB":        e.DynamoWriteUnits/M*pr.DynamoWriteMillion + e.DynamoReadUnits/M*pr.DynamoReadMillion,
		"Lambda":          gbSeconds*pr.LambdaGBSecond + invocations/M*pr.LambdaRequestMillion,
		"API Gateway":     apiCalls / M * pr.APIRequestMillion,
		"S3":              a.FilesPerMessage * M / 1000 * (pr.S3PutThousand + pr.S3GetThousand),
		"CloudWatch Logs": (apiCalls + deliveries) * a.LogBytesPerCall / (1 << 30) * pr.LogsIngestGB,
	}
	total := 0.0
	for _, v := range e.CostPerMillion {
		total += v
	}
	e.Monthly = total * rate * secondsPerMonth / M
	return e
}

// Print writes the estimate as text.
func (e Estimate) Print(w io.Writer) {
	l := e.Load
	fmt.Fprintf(w, "Load: %.0f messages/s, %d bots, %d conversations, %.0f table queries/s\n", l.MessagesPerSecond, l.Bots, l.Conversations, l.TableQueriesPerSecond)
	fmt.Fprintf(w, "Replayed: %d bots, %d conversations, %d turns each (keys of one conversation or bot scaled to the load's share)\n\n",
		e.Replayed.Bots, e.Replayed.Conversations, e.Replayed.Turns)
	fmt.Fprintf(w, "Per message: %.2f write units, %.2f read units, %.2f deliveries, %.2f API calls (sweep: %.0f read units a minute)\n\n",
		e.WritePerMessage, e.ReadPerMessage, e.DeliveriesPerMessage, e.APICallsPerMessage, e.SweepReadsPerMinute)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY (index, pattern)\tKEYS\tWRITE UNITS\tPEAK WCU/KEY\tPEAK RCU/KEY")
	for _, k := range e.Keys {
		ix := k.Index
		if ix == "" {
			ix = "table"
		}
		fmt.Fprintf(tw, "%s %s\t%d\t%.0f\t%.1f\t%.1f\n", ix, k.Pattern, k.Keys, k.Write, k.PeakWCU, k.PeakRCU)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nCeiling: %.0f messages/s (the hottest key for writes, %s, reaches %d WCU)\n", e.Ceiling, e.Hottest, PartitionWCU)
	fmt.Fprintf(w, "Read ceiling: %.0f messages/s (%s reaches %d RCU)\n", e.ReadCeiling, e.HottestRead, PartitionRCU)
	fmt.Fprintf(w, "With the outbox on one key (the previous layout): %.0f messages/s\n", e.CeilingOneOutbox)
	fmt.Fprintf(w, "Lambda concurrency: %.1f API, %.1f dispatcher (assuming %.0f ms per API call, %.0f ms per delivery)\n\n",
		e.APIConcurrency, e.DispatcherConcurrency, e.Assumptions.APIMillis, e.Assumptions.DeliveryMillis)
	total := 0.0
	for _, s := range []string{"DynamoDB", "Lambda", "API Gateway", "S3", "CloudWatch Logs"} {
		fmt.Fprintf(w, "  %-16s $%8.2f per million messages\n", s, e.CostPerMillion[s])
		total += e.CostPerMillion[s]
	}
	fmt.Fprintf(w, "  %-16s $%8.2f per million messages; $%.0f a month at %.0f messages/s (on-demand, us-east-1)\n", "total", total, e.Monthly, l.MessagesPerSecond)
	e.printProvisioned(w, total)
}
