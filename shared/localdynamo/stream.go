package localdynamo

import "encoding/json"

// Change is one committed change of an item, as a DynamoDB stream with
// StreamViewType KEYS_ONLY reports it: the table, INSERT, MODIFY or REMOVE,
// and the item's key attributes (wire JSON). The AWS-shaped local stack
// (shared/awslocal) feeds these to an event source mapping; a write that
// changes nothing (a condition check) makes none.
type Change struct {
	Table     string
	EventName string
	Keys      json.RawMessage
}

// changeHook is what OnChange set.
type changeHook = func([]Change)

// OnChange sets a function called after every commit that changed items,
// with those changes in commit order, on the writer's goroutine (it must
// not block). Changes are not kept: a process that was not listening when
// a write committed never sees it (the table's stream starts at LATEST).
func (s *Server) OnChange(f func([]Change)) { s.onChange.Store(&f) }

// change is the stream record of a write from old to nw.
func (t *tableDef) change(old, nw item) (Change, bool) {
	var name string
	var it item
	switch {
	case old == nil && nw != nil:
		name, it = "INSERT", nw
	case old != nil && nw == nil:
		name, it = "REMOVE", old
	case old != nil && nw != nil:
		name, it = "MODIFY", nw
	default:
		return Change{}, false
	}
	keys := item{t.Hash: it[t.Hash]}
	if t.Range != "" {
		keys[t.Range] = it[t.Range]
	}
	return Change{Table: t.Name, EventName: name, Keys: appendItemJSON(nil, keys)}, true
}

// notify hands committed changes to the hook, if any.
func (s *Server) notify(cs []Change) {
	if len(cs) == 0 {
		return
	}
	if f := s.onChange.Load(); f != nil && *f != nil {
		(*f)(cs)
	}
}
