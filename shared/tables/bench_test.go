package tables

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/botforge/platform/shared/platform"
)

// benchTable is a schema and 50,000 stored rows (as JSON documents, the way
// the store holds them) for the find benchmarks.
func benchTable(b *testing.B) (*Schema, [][]byte) {
	s, err := Define(json.RawMessage(`{"type":"object","properties":{"n":{"type":"number"},"s":{"type":"string","x-zui":{"searchable":true}},"city":{"type":"string"}}}`))
	if err != nil {
		b.Fatal(err)
	}
	s.Bind(nil, platform.TableState{})
	docs := make([][]byte, 50000)
	for i := range docs {
		in := map[string]json.RawMessage{
			"n":    json.RawMessage(fmt.Sprint(i)),
			"s":    encode(fmt.Sprintf("customer %d ordered %s", i, []string{"apples", "pears", "plums", "figs"}[i%4])),
			"city": encode(fmt.Sprintf("city %d", i%100)),
		}
		vals, _, err := s.CheckRow(in, true)
		if err != nil {
			b.Fatal(err)
		}
		docs[i], _ = json.Marshal(s.NewRow(int64(i+1), "2024-01-01T00:00:00.000Z", vals))
	}
	return s, docs
}

// docRows decodes stored documents as the store does, for each scan.
type docRows [][]byte

func (d docRows) ScanRows(ctx context.Context, sc Scan, fn func(r *platform.TableRow) (bool, error)) error {
	for _, doc := range d {
		var r platform.TableRow
		if err := json.Unmarshal(doc, &r); err != nil {
			return err
		}
		if more, err := fn(&r); err != nil || !more {
			return err
		}
	}
	return nil
}

// BenchmarkFindLogic measures what a find adds to reading the rows, on
// 50,000 rows: decoding the documents alone, then filtering, searching and
// ordering them.
func BenchmarkFindLogic(b *testing.B) {
	s, docs := benchTable(b)
	src := docRows(docs)
	se, _ := ParseSearch("customer 31337 figs", s)
	f, _ := ParseFilter(json.RawMessage(`{"n":31337}`), s)
	for _, tc := range []struct {
		name string
		q    Query
	}{
		{"decodeOnly", Query{Filter: &Filter{root: andCond{}}, Limit: 1}},
		{"eqFilter", Query{Filter: f, Limit: 100}},
		{"search", Query{Search: se, Limit: 10}},
		{"orderByColumn", Query{OrderBy: "city", Limit: 100}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				q := tc.q
				if tc.name == "decodeOnly" {
					_ = src.ScanRows(context.Background(), Scan{}, func(*platform.TableRow) (bool, error) { return true, nil })
					continue
				}
				if _, err := Find(context.Background(), src, s, q); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
