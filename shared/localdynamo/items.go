package localdynamo

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"

	"github.com/cockroachdb/pebble"
)

// handler is one operation: its function and how it takes the server lock.
type handler struct {
	fn func(s *Server, req request) (any, error)
	// read is a read of items that says what it read (the keys and
	// ranges), so that it waits only for the writes in flight there.
	read func(s *Server, req request, rs *readSet) (any, error)
	// aside is fn for a write of a lane (lane.go): it calls the lane's
	// visible once the write is visible, before its fsync ends.
	aside func(s *Server, req request, ax *aside) (any, error)
	write bool // refused when the disk is full
	table bool // changes table definitions: runs alone
}

// request is the input of one operation: its JSON body (the HTTP path),
// or, from the in-process path (inprocess.go), the operation's input
// struct already filled from the SDK's typed input.
type request struct {
	body []byte
	in   any // a pointer to the handler's input type, or nil
}

// decode fills v (a pointer to the operation's input type).
func (r request) decode(v any) error {
	if r.in == nil {
		return decode(r.body, v)
	}
	dst, src := reflect.ValueOf(v).Elem(), reflect.ValueOf(r.in).Elem()
	if dst.Type() != src.Type() {
		return fmt.Errorf("localdynamo: in-process input %T for %T", r.in, v)
	}
	dst.Set(src)
	return nil
}

var handlers map[string]handler

func init() {
	// Table operations take only JSON (the in-process path leaves them
	// to the HTTP path).
	op := func(f func(*Server, []byte) (any, error)) func(*Server, request) (any, error) {
		return func(s *Server, r request) (any, error) { return f(s, r.body) }
	}
	handlers = map[string]handler{
		"GetItem":            {read: (*Server).getItem},
		"PutItem":            {fn: (*Server).putItem, write: true},
		"UpdateItem":         {fn: (*Server).updateItem, write: true},
		"DeleteItem":         {fn: (*Server).deleteItem, aside: (*Server).deleteItemAside, write: true},
		"BatchGetItem":       {read: (*Server).batchGetItem},
		"BatchWriteItem":     {fn: (*Server).batchWriteItem, write: true},
		"TransactGetItems":   {read: (*Server).transactGetItems},
		"TransactWriteItems": {fn: (*Server).transactWriteItems, write: true},
		"Query":              {read: (*Server).query},
		"Scan":               {read: (*Server).scan},
		"CreateTable":        {fn: op((*Server).createTable), write: true, table: true},
		"UpdateTable":        {fn: op((*Server).updateTable), write: true, table: true},
		"DeleteTable":        {fn: op((*Server).deleteTable), table: true},
		"DescribeTable":      {fn: op((*Server).describeTable)},
		"ListTables":         {fn: op((*Server).listTables)},
		"UpdateTimeToLive":   {fn: op((*Server).updateTimeToLive), write: true, table: true},
		"DescribeTimeToLive": {fn: op((*Server).describeTimeToLive)},
	}
}

// decode parses a request body into v.
func decode(body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		return &dynErr{typ: "SerializationException", msg: err.Error()}
	}
	return nil
}

// table returns the definition of a table (the caller holds s.mu).
func (s *Server) table(name string) (*tableDef, error) {
	if name == "" {
		return nil, invalid("1 validation error detected: Value null at 'tableName' failed to satisfy constraint: Member must not be null")
	}
	t := s.tables[name]
	if t == nil {
		return nil, notFound()
	}
	return t, nil
}

// read returns the item stored at dk, or nil.
func read(r pebble.Reader, dk []byte) (item, error) {
	v, closer, err := r.Get(dk)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	it, err := decodeStored(v)
	if err != nil {
		return nil, fmt.Errorf("stored item %x: %w", dk, err)
	}
	return it, nil
}

// stage adds to b the change of the item at dk from old to nw (nil: none),
// with its index and TTL entries, and returns the bytes it makes dead.
func (t *tableDef) stage(b *pebble.Batch, dk []byte, old, nw item) (int64, error) {
	var oldEntries, newEntries []entry
	if old != nil {
		oldEntries, _ = t.entries(old, dk)
	}
	if nw != nil {
		var err error
		if newEntries, err = t.entries(nw, dk); err != nil {
			return 0, invalid("%s", err.Error())
		}
	}
	for _, o := range oldEntries {
		if !slices.ContainsFunc(newEntries, func(n entry) bool { return bytes.Equal(n.key, o.key) }) {
			if err := b.Delete(o.key, nil); err != nil {
				return 0, err
			}
		}
	}
	var dead int64
	if old != nil {
		dead = int64(itemSize(old)) * int64(1+len(oldEntries))
	}
	if nw == nil {
		if old != nil {
			return dead, b.Delete(dk, nil)
		}
		return 0, nil
	}
	if err := b.Set(dk, appendItemJSON(nil, nw), nil); err != nil {
		return 0, err
	}
	for _, n := range newEntries {
		if err := b.Set(n.key, n.value, nil); err != nil {
			return 0, err
		}
	}
	return dead, nil
}

// checkNewItem validates an item about to be stored.
func (t *tableDef) checkNewItem(it item) error {
	if _, err := t.dataKey(it, false); err != nil {
		return invalid("%s", err.Error())
	}
	if itemSize(it) > maxItemSize {
		return invalid("Item size has exceeded the maximum allowed size")
	}
	if _, err := t.entries(it, tablePrefix(prefixData, t.ID)); err != nil {
		return invalid("%s", err.Error())
	}
	return nil
}

// conditionFailed is the error of a failed ConditionExpression.
func conditionFailed(old item, returnOld string) error {
	e := &dynErr{typ: "ConditionalCheckFailedException", msg: "The conditional request failed"}
	if returnOld == "ALL_OLD" && old != nil {
		e.extra = map[string]any{"Item": itemJSON(old)}
	}
	return e
}

// writeRequest is one single-item write: where, under which condition,
// and how the item changes.
type writeRequest struct {
	t        *tableDef
	dk       []byte
	cond     *condition
	failOld  string                       // ReturnValuesOnConditionCheckFailure
	change   func(old item) (item, error) // nil result deletes; nil change only checks
	old, new item                         // filled by apply
	key      item                         // holds the key attributes (units counted)
}

// apply checks the condition and computes the new item. The caller holds
// the item's lock.
func (w *writeRequest) apply(r pebble.Reader) error {
	old, err := read(r, w.dk)
	if err != nil {
		return err
	}
	w.old = old
	ok, err := w.cond.match(old)
	if err != nil {
		return invalid("%s", err.Error())
	}
	if !ok {
		return conditionFailed(old, w.failOld)
	}
	if w.change == nil {
		w.new = old
		return nil
	}
	nw, err := w.change(old)
	if err != nil {
		return asInvalid(err)
	}
	if nw != nil {
		if err := w.t.checkNewItem(nw); err != nil {
			return err
		}
	}
	w.new = nw
	return nil
}

// writeOne runs one single-item write (of operation op) durably, its units
// charged to c.
func (s *Server) writeOne(op string, w *writeRequest, c *charge) error {
	return s.writeOneAside(op, w, c, nil)
}

// writeOneAside is writeOne for a write of a lane (ax; nil for none).
func (s *Server) writeOneAside(op string, w *writeRequest, c *charge, ax *aside) error {
	unlock := s.lockItems(w.dk)
	defer unlock()
	if err := w.apply(s.db); err != nil {
		if isConditionFailed(err) {
			w.t.chargeWrite(c, w.key, w.old, w.old, 1, true)
			s.units.record(op, c)
		}
		return err
	}
	b := s.db.NewBatch()
	defer b.Close()
	dead, err := w.t.stage(b, w.dk, w.old, w.new)
	if err != nil {
		return err
	}
	if err := s.commitAside(b, dead, ax); err != nil {
		return err
	}
	w.t.chargeWrite(c, w.key, w.old, w.new, 1, false)
	s.units.record(op, c)
	if ch, ok := w.t.change(w.old, w.new); ok {
		s.notify([]Change{ch})
	}
	return nil
}

func isConditionFailed(err error) bool {
	var de *dynErr
	return errors.As(err, &de) && de.typ == "ConditionalCheckFailedException"
}

func checkReturnValues(rv string, allowed ...string) error {
	if rv == "" || rv == "NONE" || slices.Contains(allowed, rv) {
		return nil
	}
	return invalid("1 validation error detected: Value '%s' at 'returnValues' failed to satisfy constraint: Member must satisfy enum value set: [%s]", rv, "NONE, "+fmt.Sprint(allowed))
}

// legacyParams are the pre-expression parameters, which this store refuses
// with a clear message rather than ignoring.
type legacyParams struct {
	Expected            json.RawMessage
	ConditionalOperator json.RawMessage
	AttributeUpdates    json.RawMessage
	AttributesToGet     json.RawMessage
	KeyConditions       json.RawMessage
	QueryFilter         json.RawMessage
	ScanFilter          json.RawMessage
}

func (l legacyParams) check() error {
	for name, v := range map[string]json.RawMessage{
		"Expected": l.Expected, "ConditionalOperator": l.ConditionalOperator, "AttributeUpdates": l.AttributeUpdates,
		"AttributesToGet": l.AttributesToGet, "KeyConditions": l.KeyConditions, "QueryFilter": l.QueryFilter, "ScanFilter": l.ScanFilter,
	} {
		if len(v) > 0 && string(v) != "null" {
			return invalid("the legacy parameter %s is not supported by the embedded DynamoDB; use expressions", name)
		}
	}
	return nil
}

type getItemInput struct {
	TableName              string
	Key                    wireItem
	ProjectionExpression   string
	ConsistentRead         bool
	ReturnConsumedCapacity string
	exprInput
	legacyParams
}

func (s *Server) getItem(req request, rs *readSet) (any, error) {
	var in getItemInput
	if err := req.decode(&in); err != nil {
		return nil, err
	}
	t, key, dk, proj, err := s.prepareGet(in)
	if err != nil {
		return nil, err
	}
	c, err := s.newCharge(in.ReturnConsumedCapacity)
	if err != nil {
		return nil, err
	}
	rs.point(dk)
	it, err := read(s.db, dk)
	if err != nil {
		return nil, err
	}
	chargeGet(c, t, key, it, in.ConsistentRead, 1)
	s.units.record("GetItem", c)
	if it == nil {
		return s.answer(json.RawMessage("{}"), c, false, false), nil
	}
	if it, err = proj.apply(it); err != nil {
		return nil, asInvalid(err)
	}
	return s.answer(map[string]any{"Item": jsonItem(it)}, c, false, false), nil
}

// prepareGet validates a GetItem-shaped request.
func (s *Server) prepareGet(in getItemInput) (*tableDef, item, []byte, *projection, error) {
	t, key, dk, err := s.keyed(in.TableName, in.Key, in.legacyParams)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if err := in.exprInput.checkPlaceholders(in.ProjectionExpression); err != nil {
		return nil, nil, nil, nil, asInvalid(err)
	}
	proj, err := compileProjection(in.ProjectionExpression, in.exprInput)
	if err != nil {
		return nil, nil, nil, nil, asInvalid(err)
	}
	return t, key, dk, proj, nil
}

// chargeGet charges c the units of reading one item (it, nil when absent)
// by its key.
func chargeGet(c *charge, t *tableDef, key, it item, consistent bool, factor float64) {
	chargeRead(c, Partition{Table: t.Name, Key: keyText(key[t.Hash])}, itemSize(it), consistent, factor)
}

// keyed resolves the table and the Key of a single-item request.
func (s *Server) keyed(table string, rawKey wireItem, legacy legacyParams) (*tableDef, item, []byte, error) {
	if err := legacy.check(); err != nil {
		return nil, nil, nil, err
	}
	t, err := s.table(table)
	if err != nil {
		return nil, nil, nil, err
	}
	key, err := decodeItem(rawKey)
	if err != nil {
		return nil, nil, nil, asInvalid(err)
	}
	dk, err := t.dataKey(key, true)
	if err != nil {
		return nil, nil, nil, asInvalid(err)
	}
	return t, key, dk, nil
}

type putInput struct {
	TableName                           string
	Item                                wireItem
	ConditionExpression                 *string
	ReturnValues                        string
	ReturnValuesOnConditionCheckFailure string
	ReturnConsumedCapacity              string
	exprInput
	legacyParams
}

// prepare builds the write request of a Put.
func (s *Server) preparePut(in putInput) (*writeRequest, error) {
	if err := in.legacyParams.check(); err != nil {
		return nil, err
	}
	t, err := s.table(in.TableName)
	if err != nil {
		return nil, err
	}
	it, err := decodeItem(in.Item)
	if err != nil {
		return nil, asInvalid(err)
	}
	if it == nil {
		return nil, invalid("1 validation error detected: Value null at 'item' failed to satisfy constraint: Member must not be null")
	}
	dk, err := t.dataKey(it, false)
	if err != nil {
		return nil, asInvalid(err)
	}
	cond, err := compileWriteCondition(in.ConditionExpression, in.exprInput)
	if err != nil {
		return nil, err
	}
	return &writeRequest{t: t, dk: dk, cond: cond, failOld: in.ReturnValuesOnConditionCheckFailure, key: it,
		change: func(item) (item, error) { return it, nil }}, nil
}

// compileWriteCondition checks the placeholders and parses a write's
// ConditionExpression.
func compileWriteCondition(expr *string, in exprInput, more ...string) (*condition, error) {
	e := ""
	if expr != nil {
		e = *expr
		if e == "" {
			return nil, invalid("Invalid ConditionExpression: The expression can not be empty;")
		}
	}
	if err := in.checkPlaceholders(append([]string{e}, more...)...); err != nil {
		return nil, asInvalid(err)
	}
	cond, err := compileCondition("ConditionExpression", e, in)
	return cond, asInvalid(err)
}

func (s *Server) putItem(req request) (any, error) {
	var in putInput
	if err := req.decode(&in); err != nil {
		return nil, err
	}
	return s.replace("PutItem", in.ReturnValues, in.ReturnConsumedCapacity, nil, func() (*writeRequest, error) { return s.preparePut(in) })
}

// replace runs a PutItem or DeleteItem and answers its ReturnValues (NONE
// or ALL_OLD) and ReturnConsumedCapacity.
func (s *Server) replace(op, returnValues, returnCapacity string, ax *aside, prepare func() (*writeRequest, error)) (any, error) {
	if err := checkReturnValues(returnValues, "ALL_OLD"); err != nil {
		return nil, err
	}
	w, err := prepare()
	if err != nil {
		return nil, err
	}
	c, err := s.newCharge(returnCapacity)
	if err != nil {
		return nil, err
	}
	if err := s.writeOneAside(op, w, c, ax); err != nil {
		return nil, err
	}
	if returnValues == "ALL_OLD" && w.old != nil {
		return s.answer(map[string]any{"Attributes": jsonItem(w.old)}, c, true, false), nil
	}
	return s.answer(json.RawMessage("{}"), c, true, false), nil
}

type deleteInput struct {
	TableName                           string
	Key                                 wireItem
	ConditionExpression                 *string
	ReturnValues                        string
	ReturnValuesOnConditionCheckFailure string
	ReturnConsumedCapacity              string
	exprInput
	legacyParams
}

func (s *Server) prepareDelete(in deleteInput) (*writeRequest, error) {
	t, key, dk, err := s.keyed(in.TableName, in.Key, in.legacyParams)
	if err != nil {
		return nil, err
	}
	cond, err := compileWriteCondition(in.ConditionExpression, in.exprInput)
	if err != nil {
		return nil, err
	}
	return &writeRequest{t: t, dk: dk, cond: cond, failOld: in.ReturnValuesOnConditionCheckFailure, key: key,
		change: func(item) (item, error) { return nil, nil }}, nil
}

func (s *Server) deleteItem(req request) (any, error) { return s.deleteItemAside(req, nil) }

func (s *Server) deleteItemAside(req request, ax *aside) (any, error) {
	var in deleteInput
	if err := req.decode(&in); err != nil {
		return nil, err
	}
	return s.replace("DeleteItem", in.ReturnValues, in.ReturnConsumedCapacity, ax, func() (*writeRequest, error) { return s.prepareDelete(in) })
}

type updateInput struct {
	TableName                           string
	Key                                 wireItem
	UpdateExpression                    *string
	ConditionExpression                 *string
	ReturnValues                        string
	ReturnValuesOnConditionCheckFailure string
	ReturnConsumedCapacity              string
	exprInput
	legacyParams
}

func (s *Server) prepareUpdate(in updateInput) (*writeRequest, *update, error) {
	t, key, dk, err := s.keyed(in.TableName, in.Key, in.legacyParams)
	if err != nil {
		return nil, nil, err
	}
	ue := ""
	if in.UpdateExpression != nil {
		ue = *in.UpdateExpression
	}
	cond, err := compileWriteCondition(in.ConditionExpression, in.exprInput, ue)
	if err != nil {
		return nil, nil, err
	}
	var upd *update
	if in.UpdateExpression != nil {
		if upd, err = compileUpdate(ue, in.exprInput); err != nil {
			return nil, nil, asInvalid(err)
		}
		for _, target := range upd.targets() {
			if target == t.Hash || target == t.Range {
				return nil, nil, invalid("One or more parameter values were invalid: Cannot update attribute %s. This attribute is part of the key", target)
			}
		}
	}
	change := func(old item) (item, error) {
		base := old
		if base == nil {
			base = cloneItem(key)
		}
		if upd == nil {
			return base, nil
		}
		return upd.apply(base)
	}
	return &writeRequest{t: t, dk: dk, cond: cond, failOld: in.ReturnValuesOnConditionCheckFailure, key: key, change: change}, upd, nil
}

func (s *Server) updateItem(req request) (any, error) {
	var in updateInput
	if err := req.decode(&in); err != nil {
		return nil, err
	}
	if err := checkReturnValues(in.ReturnValues, "ALL_OLD", "UPDATED_OLD", "ALL_NEW", "UPDATED_NEW"); err != nil {
		return nil, err
	}
	w, upd, err := s.prepareUpdate(in)
	if err != nil {
		return nil, err
	}
	c, err := s.newCharge(in.ReturnConsumedCapacity)
	if err != nil {
		return nil, err
	}
	if err := s.writeOne("UpdateItem", w, c); err != nil {
		return nil, err
	}
	var out item
	switch in.ReturnValues {
	case "ALL_OLD":
		out = w.old
	case "ALL_NEW":
		out = w.new
	case "UPDATED_OLD", "UPDATED_NEW":
		src := w.new
		if in.ReturnValues == "UPDATED_OLD" {
			src = w.old
		}
		if upd != nil && src != nil {
			out = item{}
			for _, name := range upd.targets() {
				if v, ok := src[name]; ok {
					out[name] = v
				}
			}
		}
	}
	if len(out) == 0 {
		return s.answer(json.RawMessage("{}"), c, true, false), nil
	}
	return s.answer(map[string]any{"Attributes": jsonItem(out)}, c, true, false), nil
}

const (
	maxBatchGet   = 100
	maxBatchWrite = 25
	maxTransact   = 100
)

type keysAndAttributes struct {
	Keys                 []wireItem
	ProjectionExpression string
	ConsistentRead       bool
	exprInput
	legacyParams
}

type batchGetInput struct {
	RequestItems           map[string]keysAndAttributes
	ReturnConsumedCapacity string
}

func (s *Server) batchGetItem(req request, rs *readSet) (any, error) {
	var in batchGetInput
	if err := req.decode(&in); err != nil {
		return nil, err
	}
	c, err := s.newCharge(in.ReturnConsumedCapacity)
	if err != nil {
		return nil, err
	}
	if len(in.RequestItems) == 0 {
		return nil, invalid("1 validation error detected: Value at 'requestItems' failed to satisfy constraint: Member must have length greater than or equal to 1")
	}
	total := 0
	for _, ka := range in.RequestItems {
		total += len(ka.Keys)
	}
	if total > maxBatchGet {
		return nil, invalid("Too many items requested for the BatchGetItem call")
	}
	responses := map[string][]jsonItem{}
	names := make([]string, 0, len(in.RequestItems))
	for name := range in.RequestItems {
		names = append(names, name)
	}
	slices.Sort(names)
	snap := s.db.NewSnapshot()
	defer snap.Close()
	for _, name := range names {
		ka := in.RequestItems[name]
		if err := ka.legacyParams.check(); err != nil {
			return nil, err
		}
		if len(ka.Keys) == 0 {
			return nil, invalid("1 validation error detected: Value at 'requestItems.%s.member.keys' failed to satisfy constraint: Member must have length greater than or equal to 1", name)
		}
		seen := map[string]bool{}
		out := []jsonItem{}
		for _, k := range ka.Keys {
			t, key, dk, proj, err := s.prepareGet(getItemInput{TableName: name, Key: k, ProjectionExpression: ka.ProjectionExpression, exprInput: ka.exprInput})
			if err != nil {
				return nil, err
			}
			if seen[string(dk)] {
				return nil, invalid("Provided list of item keys contains duplicates")
			}
			seen[string(dk)] = true
			rs.point(dk)
			it, err := read(snap, dk)
			if err != nil {
				return nil, err
			}
			chargeGet(c, t, key, it, ka.ConsistentRead, 1)
			if it == nil {
				continue
			}
			if it, err = proj.apply(it); err != nil {
				return nil, asInvalid(err)
			}
			out = append(out, jsonItem(it))
		}
		responses[name] = out
	}
	s.units.record("BatchGetItem", c)
	return s.answer(map[string]any{"Responses": responses, "UnprocessedKeys": map[string]any{}}, c, false, true), nil
}

type batchWriteInput struct {
	RequestItems           map[string][]batchWriteRequest
	ReturnConsumedCapacity string
}

type batchWriteRequest struct {
	PutRequest    *struct{ Item wireItem }
	DeleteRequest *struct{ Key wireItem }
}

func (s *Server) batchWriteItem(req request) (any, error) {
	var in batchWriteInput
	if err := req.decode(&in); err != nil {
		return nil, err
	}
	c, err := s.newCharge(in.ReturnConsumedCapacity)
	if err != nil {
		return nil, err
	}
	if len(in.RequestItems) == 0 {
		return nil, invalid("1 validation error detected: Value at 'requestItems' failed to satisfy constraint: Member must have length greater than or equal to 1")
	}
	var ws []*writeRequest
	seen := map[string]bool{}
	names := make([]string, 0, len(in.RequestItems))
	for name := range in.RequestItems {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		reqs := in.RequestItems[name]
		if len(reqs) == 0 {
			return nil, invalid("1 validation error detected: Value at 'requestItems.%s.member' failed to satisfy constraint: Member must have length greater than or equal to 1", name)
		}
		for _, r := range reqs {
			var w *writeRequest
			var err error
			switch {
			case r.PutRequest != nil && r.DeleteRequest == nil:
				w, err = s.preparePut(putInput{TableName: name, Item: r.PutRequest.Item})
			case r.DeleteRequest != nil && r.PutRequest == nil:
				w, err = s.prepareDelete(deleteInput{TableName: name, Key: r.DeleteRequest.Key})
			default:
				err = invalid("Supplied AttributeValue has more than one datatypes set: a write request must have exactly one of PutRequest or DeleteRequest")
			}
			if err != nil {
				return nil, err
			}
			if seen[string(w.dk)] {
				return nil, invalid("Provided list of item keys contains duplicates")
			}
			seen[string(w.dk)] = true
			ws = append(ws, w)
		}
	}
	if len(ws) > maxBatchWrite {
		return nil, invalid("1 validation error detected: Value at 'requestItems' failed to satisfy constraint: Map value must satisfy constraint: [Member must have length less than or equal to 25, Member must have length greater than or equal to 1]")
	}
	if err := s.writeMany("BatchWriteItem", 1, ws, c); err != nil {
		return nil, err
	}
	return s.answer(map[string]any{"UnprocessedItems": map[string]any{}}, c, true, true), nil
}

// writeMany applies several single-item writes atomically: all conditions
// hold and all changes commit in one batch, or nothing changes. The error
// of a failed condition says which request failed. op and factor are for
// the units charged to c (a transaction's are doubled).
func (s *Server) writeMany(op string, factor float64, ws []*writeRequest, c *charge) error {
	keys := make([][]byte, len(ws))
	for i, w := range ws {
		keys[i] = w.dk
	}
	unlock := s.lockItems(keys...)
	defer unlock()
	var failed []int
	for i, w := range ws {
		if err := w.apply(s.db); err != nil {
			var de *dynErr
			if errors.As(err, &de) && de.typ == "ConditionalCheckFailedException" {
				failed = append(failed, i)
				continue
			}
			return err
		}
	}
	if len(failed) > 0 {
		// A canceled transaction still costs what it read to decide.
		for _, w := range ws {
			w.t.chargeWrite(c, w.key, w.old, w.old, factor, true)
		}
		s.units.record(op, c)
		return &canceled{ws: ws, failed: failed}
	}
	b := s.db.NewBatch()
	defer b.Close()
	var dead int64
	for _, w := range ws {
		if w.change == nil {
			continue // a condition check
		}
		d, err := w.t.stage(b, w.dk, w.old, w.new)
		if err != nil {
			return err
		}
		dead += d
	}
	if err := s.commit(b, dead); err != nil {
		return err
	}
	for _, w := range ws {
		if w.change == nil { // a condition check: read, billed as a write
			w.t.chargeWrite(c, w.key, w.old, w.old, factor, true)
			continue
		}
		w.t.chargeWrite(c, w.key, w.old, w.new, factor, false)
	}
	s.units.record(op, c)
	var cs []Change
	for _, w := range ws {
		if w.change == nil {
			continue
		}
		if c, ok := w.t.change(w.old, w.new); ok {
			cs = append(cs, c)
		}
	}
	s.notify(cs)
	return nil
}

// canceled reports the requests of writeMany whose condition failed.
type canceled struct {
	ws     []*writeRequest
	failed []int
}

func (c *canceled) Error() string { return "conditional check failed" }

// transactCommon is what every kind of TransactWriteItems item has.
type transactCommon struct {
	TableName                           string
	Key                                 wireItem
	ConditionExpression                 *string
	ReturnValuesOnConditionCheckFailure string
	exprInput
}

type transactWriteItem struct {
	ConditionCheck *transactCommon
	Put            *struct {
		transactCommon
		Item wireItem
	}
	Delete *transactCommon
	Update *struct {
		transactCommon
		UpdateExpression *string
	}
}

type transactWriteInput struct {
	TransactItems          []transactWriteItem
	ClientRequestToken     string
	ReturnConsumedCapacity string
}

func (s *Server) transactWriteItems(req request) (any, error) {
	var in transactWriteInput
	if err := req.decode(&in); err != nil {
		return nil, err
	}
	cc, err := s.newCharge(in.ReturnConsumedCapacity)
	if err != nil {
		return nil, err
	}
	if n := len(in.TransactItems); n == 0 || n > maxTransact {
		return nil, invalid("1 validation error detected: Value at 'transactItems' failed to satisfy constraint: Member must have length less than or equal to %d and greater than or equal to 1", maxTransact)
	}
	ws := make([]*writeRequest, 0, len(in.TransactItems))
	seen := map[string]bool{}
	for _, ti := range in.TransactItems {
		var w *writeRequest
		var err error
		n := 0
		switch {
		case ti.ConditionCheck != nil:
			n++
			c := ti.ConditionCheck
			if c.ConditionExpression == nil {
				return nil, invalid("1 validation error detected: Value null at 'transactItems.member.conditionCheck.conditionExpression' failed to satisfy constraint: Member must not be null")
			}
			w, err = s.prepareDelete(deleteInput{TableName: c.TableName, Key: c.Key, ConditionExpression: c.ConditionExpression,
				ReturnValuesOnConditionCheckFailure: c.ReturnValuesOnConditionCheckFailure, exprInput: c.exprInput})
			if w != nil {
				w.change = nil
			}
		}
		if ti.Put != nil {
			n++
			p := ti.Put
			w, err = s.preparePut(putInput{TableName: p.TableName, Item: p.Item, ConditionExpression: p.ConditionExpression,
				ReturnValuesOnConditionCheckFailure: p.ReturnValuesOnConditionCheckFailure, exprInput: p.exprInput})
		}
		if ti.Delete != nil {
			n++
			d := ti.Delete
			w, err = s.prepareDelete(deleteInput{TableName: d.TableName, Key: d.Key, ConditionExpression: d.ConditionExpression,
				ReturnValuesOnConditionCheckFailure: d.ReturnValuesOnConditionCheckFailure, exprInput: d.exprInput})
		}
		if ti.Update != nil {
			n++
			u := ti.Update
			if u.UpdateExpression == nil {
				return nil, invalid("1 validation error detected: Value null at 'transactItems.member.update.updateExpression' failed to satisfy constraint: Member must not be null")
			}
			w, _, err = s.prepareUpdate(updateInput{TableName: u.TableName, Key: u.Key, UpdateExpression: u.UpdateExpression,
				ConditionExpression: u.ConditionExpression, ReturnValuesOnConditionCheckFailure: u.ReturnValuesOnConditionCheckFailure, exprInput: u.exprInput})
		}
		if n != 1 {
			return nil, invalid("TransactItems can only contain one of Check, Put, Update or Delete")
		}
		if err != nil {
			return nil, err
		}
		if seen[string(w.dk)] {
			return nil, invalid("Transaction request cannot include multiple operations on one item")
		}
		seen[string(w.dk)] = true
		ws = append(ws, w)
	}
	err = s.writeMany("TransactWriteItems", 2, ws, cc)
	var c *canceled
	if errors.As(err, &c) {
		reasons := make([]map[string]any, len(ws))
		codes := make([]string, len(ws))
		for i := range ws {
			reasons[i] = map[string]any{"Code": "None"}
			codes[i] = "None"
		}
		for _, i := range c.failed {
			r := map[string]any{"Code": "ConditionalCheckFailed", "Message": "The conditional request failed"}
			if ws[i].failOld == "ALL_OLD" && ws[i].old != nil {
				r["Item"] = itemJSON(ws[i].old)
			}
			reasons[i] = r
			codes[i] = "ConditionalCheckFailed"
		}
		return nil, &dynErr{typ: "TransactionCanceledException",
			msg:   fmt.Sprintf("Transaction cancelled, please refer cancellation reasons for specific reasons %v", codes),
			extra: map[string]any{"CancellationReasons": reasons}}
	}
	if err != nil {
		return nil, err
	}
	return s.answer(json.RawMessage("{}"), cc, true, true), nil
}

type transactGetInput struct {
	TransactItems []struct {
		Get *getItemInput
	}
	ReturnConsumedCapacity string
}

func (s *Server) transactGetItems(req request, rs *readSet) (any, error) {
	var in transactGetInput
	if err := req.decode(&in); err != nil {
		return nil, err
	}
	c, err := s.newCharge(in.ReturnConsumedCapacity)
	if err != nil {
		return nil, err
	}
	if n := len(in.TransactItems); n == 0 || n > maxTransact {
		return nil, invalid("1 validation error detected: Value at 'transactItems' failed to satisfy constraint: Member must have length less than or equal to %d and greater than or equal to 1", maxTransact)
	}
	snap := s.db.NewSnapshot()
	defer snap.Close()
	out := make([]map[string]any, 0, len(in.TransactItems))
	seen := map[string]bool{}
	for _, ti := range in.TransactItems {
		if ti.Get == nil {
			return nil, invalid("TransactGetItems items must be Get")
		}
		t, key, dk, proj, err := s.prepareGet(*ti.Get)
		if err != nil {
			return nil, err
		}
		if seen[string(dk)] {
			return nil, invalid("Transaction request cannot include multiple operations on one item")
		}
		seen[string(dk)] = true
		rs.point(dk)
		it, err := read(snap, dk)
		if err != nil {
			return nil, err
		}
		chargeGet(c, t, key, it, true, 2)
		if it == nil {
			out = append(out, map[string]any{})
			continue
		}
		if it, err = proj.apply(it); err != nil {
			return nil, asInvalid(err)
		}
		out = append(out, map[string]any{"Item": jsonItem(it)})
	}
	s.units.record("TransactGetItems", c)
	return s.answer(map[string]any{"Responses": out}, c, false, true), nil
}
