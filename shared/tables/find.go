package tables

import (
	"container/heap"
	"context"
	"encoding/json"
	"sort"

	"github.com/botforge/platform/shared/platform"
)

// Find bounds.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
	// MaxWindow bounds offset+limit of a find that must rank every row
	// (ordered by something other than id, or searching): the best
	// offset+limit rows are kept in memory during the pass.
	MaxWindow = 10000
)

// Query is a parsed findTableRows request.
type Query struct {
	Filter *Filter
	Search *Search
	Group  *Group
	Select *Selection
	// OrderBy is "id", "createdAt", "updatedAt", a column (or dot path into
	// one), or, when grouping, an output field of the grouping.
	OrderBy string
	Desc    bool
	Limit   int
	Offset  int
}

// Scan is how Find asks a RowSource for a table's rows: in id order,
// ascending or descending.
type Scan struct {
	Descending bool
	// Want > 0: the caller stops after that many rows, so the source may
	// read exactly that many (an unfiltered page ordered by id reads what
	// it returns, whatever the table's size). 0: read in the store's
	// natural pages until the caller stops.
	Want int
	// Needles: the source may skip rows whose stored document lacks any
	// of them (Filter.Needles).
	Needles []string
	// Index: the source may read only the rows this lookup of a column
	// index names (Filter.Index), in id order; each is still matched.
	Index *platform.TableIndexLookup
	// After and Before bound the ids the source need read (exclusive, 0
	// for none): the filter's conditions on id.
	After, Before int64
}

// RowSource yields a table's rows in id order until fn returns false.
// Each row passed to fn is a new value fn may keep.
type RowSource interface {
	ScanRows(ctx context.Context, sc Scan, fn func(r *platform.TableRow) (bool, error)) error
}

// Result is the answer of a find.
type Result struct {
	Rows    []Row
	HasMore bool
}

// Find runs a query over a table's rows. Ordered by id without search
// or grouping, it streams rows in id order and stops as soon as it has
// offset+limit+1 matches. Otherwise it makes one pass over the table,
// keeping the best offset+limit+1 rows (or the groups).
func Find(ctx context.Context, src RowSource, s *Schema, q Query) (Result, error) {
	if q.Limit <= 0 {
		q.Limit = DefaultLimit
	}
	switch {
	case q.Group != nil:
		return findGroups(ctx, src, s, q)
	case q.Search == nil && (q.OrderBy == "" || q.OrderBy == "id"):
		return findByID(ctx, src, s, q)
	}
	return findRanked(ctx, src, s, q)
}

func (q Query) index() *platform.TableIndexLookup {
	if q.Filter == nil {
		return nil
	}
	return q.Filter.index
}

func (q Query) needles() []string {
	if q.Filter == nil {
		return nil
	}
	return q.Filter.needles
}

func findByID(ctx context.Context, src RowSource, s *Schema, q Query) (Result, error) {
	var res Result
	sc := Scan{Descending: q.Desc, Needles: q.needles(), Index: q.index()}
	if q.Filter == nil || q.Filter.idOnly {
		sc.Want = q.Offset + q.Limit + 1
	}
	if q.Filter != nil {
		sc.After, sc.Before = q.Filter.idAfter, q.Filter.idBefore
	}
	matched := 0
	err := src.ScanRows(ctx, sc, func(r *platform.TableRow) (bool, error) {
		if !q.Filter.Match(s, r) {
			return true, nil
		}
		matched++
		if matched <= q.Offset {
			return true, nil
		}
		if len(res.Rows) == q.Limit {
			res.HasMore = true
			return false, nil
		}
		res.Rows = append(res.Rows, q.Select.Apply(s.Wire(*r)))
		return true, nil
	})
	return res, err
}

// ranked is a row kept by a ranking pass.
type ranked struct {
	row   *platform.TableRow
	key   any
	score float64
}

type rankHeap struct {
	items []ranked
	less  func(a, b ranked) bool // a ranks before b
}

func (h *rankHeap) Len() int { return len(h.items) }

// The heap's top is the worst kept row, the first to evict.
func (h *rankHeap) Less(i, j int) bool { return h.less(h.items[j], h.items[i]) }
func (h *rankHeap) Swap(i, j int)      { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *rankHeap) Push(x any)         { h.items = append(h.items, x.(ranked)) }
func (h *rankHeap) Pop() any {
	n := len(h.items) - 1
	it := h.items[n]
	h.items = h.items[:n]
	return it
}

func findRanked(ctx context.Context, src RowSource, s *Schema, q Query) (Result, error) {
	window := q.Offset + q.Limit + 1
	if q.Offset+q.Limit > MaxWindow {
		return Result{}, platform.Invalid("invalid find: offset + limit may not exceed %d when ordering by a column other than id or searching; narrow the rows with a filter", MaxWindow)
	}
	var keyOf func(r *platform.TableRow) any
	date := false
	if q.Search == nil {
		p := parser{s: s, f: &Filter{}}
		f, err := p.resolve(q.OrderBy, "orderBy")
		if err != nil {
			return Result{}, platform.Invalid("invalid orderBy: %q is not a column of the table (nor id, createdAt, updatedAt)", q.OrderBy)
		}
		date = f.date || f.system != ""
		keyOf = func(r *platform.TableRow) any {
			v := rowView{s: s, r: r}
			if cands, ok := v.values(f); ok && len(cands) > 0 {
				return cands[0]
			}
			return nil
		}
	}
	less := func(a, b ranked) bool {
		if q.Search != nil {
			if a.score != b.score {
				return a.score > b.score
			}
			return a.row.ID < b.row.ID
		}
		if c := compareValues(a.key, b.key, date); c != 0 {
			return (c < 0) != q.Desc
		}
		return (a.row.ID < b.row.ID) != q.Desc
	}
	h := &rankHeap{less: less}
	err := src.ScanRows(ctx, Scan{Needles: q.needles(), Index: q.index()}, func(r *platform.TableRow) (bool, error) {
		if !q.Filter.Match(s, r) {
			return true, nil
		}
		it := ranked{row: r}
		if q.Search != nil {
			it.score = q.Search.Score(r)
		} else {
			it.key = keyOf(r)
		}
		if h.Len() < window {
			heap.Push(h, it)
		} else if less(it, h.items[0]) {
			h.items[0] = it
			heap.Fix(h, 0)
		}
		return true, nil
	})
	if err != nil {
		return Result{}, err
	}
	kept := h.items
	sort.Slice(kept, func(i, j int) bool { return less(kept[i], kept[j]) })
	var res Result
	for i := q.Offset; i < len(kept) && i < q.Offset+q.Limit; i++ {
		row := q.Select.Apply(s.Wire(*kept[i].row))
		if q.Search != nil {
			row["similarity"] = kept[i].score
		}
		res.Rows = append(res.Rows, row)
	}
	res.HasMore = len(kept) > q.Offset+q.Limit
	return res, nil
}

func findGroups(ctx context.Context, src RowSource, s *Schema, q Query) (Result, error) {
	gr := q.Group.start(s)
	err := src.ScanRows(ctx, Scan{Needles: q.needles(), Index: q.index()}, func(r *platform.TableRow) (bool, error) {
		if !q.Filter.Match(s, r) {
			return true, nil
		}
		return true, gr.add(r)
	})
	if err != nil {
		return Result{}, err
	}
	rows := gr.rows()
	q.Group.sortGroups(rows, q.OrderBy, q.Desc)
	var res Result
	for i := q.Offset; i < len(rows) && i < q.Offset+q.Limit; i++ {
		res.Rows = append(res.Rows, rows[i])
	}
	res.HasMore = len(rows) > q.Offset+q.Limit
	return res, nil
}

// CheckOrderBy validates orderBy against the schema (and the grouping).
func CheckOrderBy(orderBy string, s *Schema, g *Group) error {
	if orderBy == "" || orderBy == "id" {
		return nil
	}
	if g != nil {
		if g.HasField(orderBy) {
			return nil
		}
		return platform.Invalid("invalid orderBy: %q is not a field of the grouped rows (order them by a key or an aggregate, e.g. %q)", orderBy, g.firstField())
	}
	p := parser{s: s, f: &Filter{}}
	if _, err := p.resolve(orderBy, "orderBy"); err != nil {
		return platform.Invalid("invalid orderBy: %q is not a column of the table (nor id, createdAt, updatedAt)", orderBy)
	}
	return nil
}

// MarshalRows renders result rows.
func MarshalRows(rows []Row) json.RawMessage {
	if rows == nil {
		rows = []Row{}
	}
	b, _ := json.Marshal(rows)
	return b
}
