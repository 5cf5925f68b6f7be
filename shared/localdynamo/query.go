package localdynamo

import (
	"bytes"
	"encoding/binary"
	"hash/fnv"

	"github.com/cockroachdb/pebble"
	"github.com/truora/minidyn/types"
)

// maxPageBytes is DynamoDB's limit of data read by one Query or Scan page.
const maxPageBytes = 1 << 20

type readInput struct {
	TableName              string
	IndexName              string
	KeyConditionExpression string
	FilterExpression       string
	ProjectionExpression   string
	Select                 string
	Limit                  *int64
	ExclusiveStartKey      wireItem
	ScanIndexForward       *bool
	ConsistentRead         bool
	ReturnConsumedCapacity string
	Segment                *int64
	TotalSegments          *int64
	exprInput
	legacyParams
}

// page is one Query or Scan: the key range to walk and what to do with each
// item on it.
type page struct {
	t            *tableDef
	ix           *indexDef
	lower, upper []byte
	// final, when set, is the last key the range can hold (a Query of the
	// table whose sort key condition ends at a value: =, <=, BETWEEN): a
	// forward walk stops there instead of stepping on to the bound, over
	// the older versions of that item (a counter updated on every message
	// has thousands in the memtable) and whatever was deleted after it.
	final   []byte
	reverse bool
	filter  *condition
	proj    *projection
	count   bool
	limit   int64
	keep    func(item) bool // Scan segments
	op      string          // Query or Scan (units counted)
	part    string          // the partition key queried, as text
}

func (s *Server) query(req request, rs *readSet) (any, error) {
	var in readInput
	if err := req.decode(&in); err != nil {
		return nil, err
	}
	p, err := s.preparePage(in, false)
	if err != nil {
		return nil, err
	}
	p.op = "Query"
	return s.run(p, in, rs)
}

func (s *Server) scan(req request, rs *readSet) (any, error) {
	var in readInput
	if err := req.decode(&in); err != nil {
		return nil, err
	}
	p, err := s.preparePage(in, true)
	if err != nil {
		return nil, err
	}
	p.op, p.part = "Scan", "(scan)"
	return s.run(p, in, rs)
}

// preparePage validates a Query or Scan and computes its key range.
func (s *Server) preparePage(in readInput, scan bool) (*page, error) {
	if err := in.legacyParams.check(); err != nil {
		return nil, err
	}
	t, err := s.table(in.TableName)
	if err != nil {
		return nil, err
	}
	p := &page{t: t}
	if in.IndexName != "" {
		if p.ix = t.index(in.IndexName); p.ix == nil {
			return nil, invalid("The table does not have the specified index: %s", in.IndexName)
		}
		if in.ConsistentRead && !p.ix.Local {
			return nil, invalid("Consistent reads are not supported on global secondary indexes")
		}
	}
	if in.Limit != nil && *in.Limit < 1 {
		return nil, invalid("1 validation error detected: Value '%d' at 'limit' failed to satisfy constraint: Member must have value greater than or equal to 1", *in.Limit)
	}
	if in.Limit != nil {
		p.limit = *in.Limit
	}
	switch in.Select {
	case "", "ALL_ATTRIBUTES", "ALL_PROJECTED_ATTRIBUTES":
	case "SPECIFIC_ATTRIBUTES":
		if in.ProjectionExpression == "" {
			return nil, invalid("SPECIFIC_ATTRIBUTES requires a ProjectionExpression")
		}
	case "COUNT":
		if in.ProjectionExpression != "" {
			return nil, invalid("Cannot specify the ProjectionExpression when choosing to get only the Count")
		}
		p.count = true
	default:
		return nil, invalid("1 validation error detected: Value '%s' at 'select' failed to satisfy constraint: Member must satisfy enum value set: [SPECIFIC_ATTRIBUTES, COUNT, ALL_ATTRIBUTES, ALL_PROJECTED_ATTRIBUTES]", in.Select)
	}
	if scan && in.KeyConditionExpression != "" {
		return nil, invalid("Scan does not take a KeyConditionExpression")
	}
	if err := in.exprInput.checkPlaceholders(in.KeyConditionExpression, in.FilterExpression, in.ProjectionExpression); err != nil {
		return nil, asInvalid(err)
	}
	if in.FilterExpression != "" || !scan {
		if p.filter, err = compileCondition("FilterExpression", in.FilterExpression, in.exprInput); err != nil {
			return nil, asInvalid(err)
		}
	}
	if p.proj, err = compileProjection(in.ProjectionExpression, in.exprInput); err != nil {
		return nil, asInvalid(err)
	}

	// The key range: the whole table or index for a Scan, one partition
	// (narrowed by the sort key condition) for a Query.
	prefix := tablePrefix(prefixData, t.ID)
	if p.ix != nil {
		prefix = binary.BigEndian.AppendUint16(tablePrefix(prefixIndex, t.ID), p.ix.No)
	}
	p.lower, p.upper = prefix, prefixEnd(prefix)
	if scan {
		if (in.Segment == nil) != (in.TotalSegments == nil) {
			return nil, invalid("The Segment parameter is required but was not present in the request when parameter TotalSegments is present")
		}
		if in.TotalSegments != nil {
			total, seg := *in.TotalSegments, *in.Segment
			if total < 1 || total > 1000000 || seg < 0 || seg >= total {
				return nil, invalid("The Segment parameter must be between 0 and TotalSegments-1, TotalSegments between 1 and 1000000")
			}
			hash, _ := t.keySchema(p.ix)
			p.keep = func(it item) bool {
				h := fnv.New64a()
				_, _ = h.Write(appendValueJSON(nil, it[hash]))
				return int64(h.Sum64()%uint64(total)) == seg
			}
		}
	} else {
		if err := p.keyRange(in, prefix); err != nil {
			return nil, err
		}
	}
	p.reverse = !scan && in.ScanIndexForward != nil && !*in.ScanIndexForward

	if in.ExclusiveStartKey.present() {
		esk, err := decodeItem(in.ExclusiveStartKey)
		if err != nil {
			return nil, asInvalid(err)
		}
		pos, err := p.position(esk)
		if err != nil {
			return nil, invalid("The provided starting key is invalid: %s", err.Error())
		}
		if p.reverse {
			if bytes.Compare(pos, p.upper) < 0 {
				p.upper = pos
			}
		} else {
			after := append(append([]byte(nil), pos...), 0)
			if bytes.Compare(after, p.lower) > 0 {
				p.lower = after
			}
		}
	}
	return p, nil
}

// keyRange narrows the range to the Query's partition and sort key condition.
func (p *page) keyRange(in readInput, prefix []byte) error {
	hash, rng := p.t.keySchema(p.ix)
	kc, err := compileKeyCondition(in.KeyConditionExpression, in.exprInput, hash, rng)
	if err != nil {
		return asInvalid(err)
	}
	p.part = keyText(kc.hashValue)
	part, err := appendKeyValue(append([]byte(nil), prefix...), kc.hashValue, p.t.AttrTypes[hash])
	if err != nil {
		return invalid("One or more parameter values were invalid: Condition parameter type does not match schema type")
	}
	p.lower, p.upper = part, prefixEnd(part)
	if kc.op == "" {
		return nil
	}
	// An item's key ends with its sort key's encoding (keys.go), so the
	// item at the condition's last value is the range's last key; an index
	// entry's key goes on (the item's own key follows): no last key.
	final := func(k []byte) {
		if p.ix == nil {
			p.final = k
		}
	}
	typ := p.t.AttrTypes[rng]
	enc := func(v *types.Item) ([]byte, error) {
		b, err := appendKeyValue(append([]byte(nil), part...), v, typ)
		if err != nil {
			return nil, invalid("One or more parameter values were invalid: Condition parameter type does not match schema type")
		}
		return b, nil
	}
	a, err := enc(kc.a)
	if kc.op != "begins_with" && err != nil {
		return err
	}
	switch kc.op {
	case "=":
		p.lower, p.upper = a, prefixEnd(a)
		final(a)
	case "<":
		p.upper = a
	case "<=":
		p.upper = prefixEnd(a)
		final(a)
	case ">":
		p.lower = prefixEnd(a)
	case ">=":
		p.lower = a
	case "BETWEEN":
		b, err := enc(kc.b)
		if err != nil {
			return err
		}
		if bytes.Compare(a, b) > 0 {
			return invalid("Invalid KeyConditionExpression: The BETWEEN operator requires upper bound to be greater than or equal to lower bound; lower bound operand: AttributeValue: %s, upper bound operand: AttributeValue: %s",
				appendValueJSON(nil, kc.a), appendValueJSON(nil, kc.b))
		}
		p.lower, p.upper = a, prefixEnd(b)
		final(b)
	case "begins_with":
		if typ == "N" {
			return invalid("Invalid KeyConditionExpression: Incorrect operand type for operator or function; operator or function: begins_with, operand type: N")
		}
		var raw []byte
		switch {
		case typ == "S" && kc.a.S != nil:
			raw = []byte(*kc.a.S)
		case typ == "B" && kc.a.B != nil:
			raw = kc.a.B
		default:
			return invalid("One or more parameter values were invalid: Condition parameter type does not match schema type")
		}
		pre := appendEscaped(append([]byte(nil), part...), raw)
		pre = pre[:len(pre)-2] // no terminator: a prefix of longer values
		p.lower, p.upper = pre, prefixEnd(pre)
	}
	return nil
}

// position is the store key an ExclusiveStartKey points at.
func (p *page) position(esk item) ([]byte, error) {
	dk, err := p.t.dataKey(esk, false)
	if err != nil {
		return nil, err
	}
	if p.ix == nil {
		if len(esk) != len(p.t.keyAttrs(esk)) {
			return nil, errBadStartKey
		}
		return dk, nil
	}
	k, err := p.t.indexKey(p.ix, esk, dk)
	if err != nil {
		return nil, errBadStartKey
	}
	return k, nil
}

var errBadStartKey = errorString("the key does not match the key schema")

type errorString string

func (e errorString) Error() string { return string(e) }

// run walks the page's range: items are read (and counted against Limit
// and the 1 MB page size) before the filter applies, as in DynamoDB.
func (s *Server) run(p *page, in readInput, rs *readSet) (any, error) {
	c, err := s.newCharge(in.ReturnConsumedCapacity)
	if err != nil {
		return nil, err
	}
	rs.span(p.lower, p.upper)
	// Dead ranges are learned and used within a partition only (a Query):
	// a Scan's would span the table, and every write would cut it up.
	query := p.op == "Query" && !p.reverse
	snap, from, gen := s.dead.snapshot(s.db, p.lower, query)
	defer snap.Close()
	iter, err := snap.NewIter(&pebble.IterOptions{LowerBound: p.lower, UpperBound: p.upper})
	if err != nil {
		return nil, err
	}
	defer func() {
		s.stepped.Add(int64(iter.Stats().InternalStats.PointCount))
		iter.Close()
	}()
	var (
		items   = []jsonItem{}
		count   int64
		scanned int64
		bytesRd int
		sized   int // DynamoDB's size of what was read (units)
		last    item
	)
	valid := iter.First
	step := iter.Next
	if p.reverse {
		valid, step = iter.Last, iter.Prev
	} else if from != nil {
		valid = func() bool { return iter.SeekGE(from) }
	}
	ok := valid()
	if query && iter.Error() == nil && iter.Stats().InternalStats.PointCount > 1 {
		// What lies before the first live key is dead (in this snapshot),
		// and it held keys to step over (or the range is not worth one).
		first := p.upper
		if ok {
			first = iter.Key()
		}
		s.dead.learn(p.lower, first, gen)
	}
	for ; ok; ok = step() {
		var it item
		if p.ix == nil {
			var err error
			if it, err = decodeStored(iter.Value()); err != nil {
				return nil, err
			}
			bytesRd += len(iter.Value())
		} else {
			// The entry holds the projected item (entries of stores written
			// before that hold the item's data key).
			v := iter.Value()
			if len(v) > 0 && v[0] == prefixData {
				rs.point(v)
				full, err := read(snap, v)
				if err != nil || full == nil {
					continue
				}
				it = p.t.project(p.ix, full)
			} else {
				var err error
				if it, err = decodeStored(v); err != nil {
					return nil, err
				}
			}
			bytesRd += len(v)
		}
		scanned++
		sized += itemSize(it)
		last = it
		if p.keep == nil || p.keep(it) {
			match, err := p.filter.match(it)
			if err != nil {
				return nil, asInvalid(err)
			}
			if match {
				count++
				if !p.count {
					out, err := p.proj.apply(it)
					if err != nil {
						return nil, asInvalid(err)
					}
					items = append(items, jsonItem(out))
				}
			}
		}
		if (p.limit > 0 && scanned >= p.limit) || bytesRd >= maxPageBytes {
			break
		}
		if !p.reverse && p.final != nil && bytes.Equal(iter.Key(), p.final) {
			break // nothing can follow in range
		}
	}
	if err := iter.Error(); err != nil {
		return nil, err
	}
	out := map[string]any{"Count": count, "ScannedCount": scanned}
	if !p.count {
		out["Items"] = items
	}
	// More may follow when the walk stopped early (Limit or size); DynamoDB
	// then gives the last key read, even if nothing follows it.
	if last != nil && ((p.limit > 0 && scanned >= p.limit) || bytesRd >= maxPageBytes) {
		out["LastEvaluatedKey"] = jsonItem(p.t.lastKey(p.ix, last))
	}
	ix := ""
	if p.ix != nil {
		ix = p.ix.Name
	}
	chargeRead(c, Partition{Table: p.t.Name, Index: ix, Key: p.part}, sized, in.ConsistentRead, 1)
	s.units.record(p.op, c)
	return s.answer(out, c, false, false), nil
}
