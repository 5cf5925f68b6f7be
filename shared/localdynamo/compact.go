package localdynamo

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/botforge/platform/shared/fsutil"
)

// Compaction thresholds: Open compacts a journal bigger than either, if the
// compacted journal would have less than half its records. Variables so
// that tests can lower them.
var (
	compactMinBytes   int64 = 64 << 20
	compactMinRecords       = 100_000
)

// compactScanPage is the Scan page size used to read tables for compaction.
var compactScanPage = 1000

// shouldCompact reports whether the journal just replayed is worth
// compacting.
func (s *Server) shouldCompact(res scanResult) bool {
	if res.validEnd <= compactMinBytes && res.records <= compactMinRecords {
		return false
	}
	live := 0
	for name, m := range s.tables {
		live += len(m.schema) + 1
		n, err := s.itemCount(name)
		if err != nil {
			return false
		}
		live += n
	}
	return live*2 < res.records
}

func (s *Server) itemCount(table string) (int, error) {
	body, _ := json.Marshal(map[string]string{"TableName": table})
	res := s.callMini("DescribeTable", body)
	if !res.ok() {
		return 0, fmt.Errorf("describe %s: %d %s", table, res.status, res.body)
	}
	var out struct{ Table struct{ ItemCount int } }
	if err := json.Unmarshal(res.body, &out); err != nil {
		return 0, err
	}
	return out.Table.ItemCount, nil
}

// scanTable calls fn for every item of table, in minidyn's key order,
// reading it in pages.
func (s *Server) scanTable(table string, fn func(item json.RawMessage) error) error {
	var start json.RawMessage
	for {
		req := map[string]any{"TableName": table, "Limit": compactScanPage}
		if start != nil {
			req["ExclusiveStartKey"] = start
		}
		body, err := json.Marshal(req)
		if err != nil {
			return err
		}
		res := s.callMini("Scan", body)
		if !res.ok() {
			return fmt.Errorf("scan %s: %d %s", table, res.status, bytes.TrimSpace(res.body))
		}
		var page struct {
			Items            []json.RawMessage
			LastEvaluatedKey map[string]json.RawMessage
		}
		if err := json.Unmarshal(res.body, &page); err != nil {
			return fmt.Errorf("scan %s: %w", table, err)
		}
		for _, it := range page.Items {
			if err := fn(it); err != nil {
				return err
			}
		}
		if len(page.LastEvaluatedKey) == 0 {
			return nil
		}
		if start, err = json.Marshal(page.LastEvaluatedKey); err != nil {
			return err
		}
	}
}

// writeCompacted writes a journal that recreates the current state: per
// table, its CreateTable and UpdateTable requests, its TTL setting and a
// PutItem per item.
func (s *Server) writeCompacted(w io.Writer) error {
	if _, err := io.WriteString(w, journalMagic); err != nil {
		return err
	}
	var buf []byte
	emit := func(r record) error {
		buf = r.appendTo(buf[:0])
		_, err := w.Write(buf)
		return err
	}
	names := make([]string, 0, len(s.tables))
	for n := range s.tables {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		m := s.tables[name]
		for _, r := range m.schema {
			if err := emit(r); err != nil {
				return err
			}
		}
		if r, ok := m.ttlRecord(); ok {
			if err := emit(r); err != nil {
				return err
			}
		}
		err := s.scanTable(name, func(item json.RawMessage) error {
			if err := checkTyped(item); err != nil {
				return fmt.Errorf("table %s: %w", name, err)
			}
			body, err := json.Marshal(map[string]any{"TableName": name, "Item": item})
			if err != nil {
				return err
			}
			return emit(record{flag: flagApplied, op: "PutItem", body: body})
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// compact writes a compacted journal next to the one at path and, provided
// that replaying it reproduces every table's items and TTL setting exactly,
// renames it over the old one and adopts the state replayed from it. It
// returns the open compacted journal and ok; if compaction fails, it leaves
// the old journal and the server's state alone and keeps the reason in
// compactSkipped. Compacted indexes contain all items, also those written
// before an UpdateTable added the index, which minidyn does not backfill.
func (s *Server) compact(path string) (f *os.File, res scanResult, ok bool) {
	tmp := path + ".compact"
	fresh := &Server{}
	err := func() error {
		err := writeFileSynced(tmp, s.writeCompacted)
		if err != nil {
			return err
		}
		if f, res, err = fresh.replayFile(tmp); err != nil {
			return err
		}
		if res.validEnd != res.size {
			return errors.New("compacted journal has a damaged tail")
		}
		if err := s.sameState(fresh); err != nil {
			return err
		}
		if err := os.Rename(tmp, path); err != nil {
			return err
		}
		return fsutil.SyncDir(filepath.Dir(path))
	}()
	if err != nil {
		if f != nil {
			_ = f.Close()
		}
		_ = os.Remove(tmp)
		s.compactSkipped = fmt.Errorf("localdynamo: compaction abandoned: %w", err)
		return nil, scanResult{}, false
	}
	s.mini, s.tables = fresh.mini, fresh.tables
	return f, res, true
}

// sameState compares the items and TTL settings of every table of s and o.
func (s *Server) sameState(o *Server) error {
	if len(s.tables) != len(o.tables) {
		return fmt.Errorf("compacted journal has %d tables, want %d", len(o.tables), len(s.tables))
	}
	for name, m := range s.tables {
		om := o.tables[name]
		if om == nil {
			return fmt.Errorf("compacted journal lacks table %s", name)
		}
		if m.ttl != om.ttl {
			return fmt.Errorf("compacted journal has another TTL setting for %s", name)
		}
		a, err := s.dumpTable(name)
		if err != nil {
			return err
		}
		b, err := o.dumpTable(name)
		if err != nil {
			return err
		}
		if !bytes.Equal(a, b) {
			return fmt.Errorf("compacted journal has other items in %s", name)
		}
	}
	return nil
}

// dumpTable renders all items of a table canonically: object members and
// set members sorted (minidyn does not keep the order of set members when
// it rewrites an item, and that order means nothing in DynamoDB).
func (s *Server) dumpTable(name string) ([]byte, error) {
	var out bytes.Buffer
	err := s.scanTable(name, func(item json.RawMessage) error {
		dec := json.NewDecoder(bytes.NewReader(item))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return err
		}
		sortSets(v)
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		out.Write(b)
		out.WriteByte('\n')
		return nil
	})
	return out.Bytes(), err
}

// sortSets sorts the members of every SS, NS and BS attribute value in v.
func sortSets(v any) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if members, ok := e.([]any); ok && len(v) == 1 && (k == "SS" || k == "NS" || k == "BS") {
				slices.SortFunc(members, func(a, b any) int {
					as, _ := a.(string)
					bs, _ := b.(string)
					return strings.Compare(as, bs)
				})
				continue
			}
			sortSets(e)
		}
	case []any:
		for _, e := range v {
			sortSets(e)
		}
	}
}

// checkTyped fails if an item read from minidyn has an attribute value
// without a type. minidyn stores empty lists and maps but reads them back as
// {}, so a compacted PutItem would not recreate them.
func checkTyped(item json.RawMessage) error {
	var attrs map[string]json.RawMessage
	if err := json.Unmarshal(item, &attrs); err != nil {
		return err
	}
	for name, raw := range attrs {
		if err := checkTypedValue(raw); err != nil {
			return fmt.Errorf("attribute %s: %w", name, err)
		}
	}
	return nil
}

func checkTypedValue(raw json.RawMessage) error {
	var av struct {
		L []json.RawMessage
		M map[string]json.RawMessage
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		return err
	}
	if len(members) == 0 {
		return errors.New("value without a type (an empty list or map)")
	}
	if err := json.Unmarshal(raw, &av); err != nil {
		return err
	}
	for _, e := range av.L {
		if err := checkTypedValue(e); err != nil {
			return err
		}
	}
	for _, e := range av.M {
		if err := checkTypedValue(e); err != nil {
			return err
		}
	}
	return nil
}
