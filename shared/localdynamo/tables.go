package localdynamo

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/cockroachdb/pebble"
)

type keySchemaElement struct {
	AttributeName string
	KeyType       string
}

type attributeDefinition struct {
	AttributeName string
	AttributeType string
}

type throughput struct {
	ReadCapacityUnits  int64
	WriteCapacityUnits int64
}

type projectionSpec struct {
	ProjectionType   string
	NonKeyAttributes []string
}

type indexSpec struct {
	IndexName             string
	KeySchema             []keySchemaElement
	Projection            *projectionSpec
	ProvisionedThroughput *throughput
}

var tableNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_.-]{3,255}$`)

// keyNames checks a key schema (one HASH, at most one RANGE) and returns
// the attribute names.
func keyNames(ks []keySchemaElement, what string) (string, string, error) {
	var hash, rng string
	for _, k := range ks {
		switch k.KeyType {
		case "HASH":
			if hash != "" {
				return "", "", invalid("%s: Too many hash keys specified. All Dynamo DB tables must have exactly one hash key", what)
			}
			hash = k.AttributeName
		case "RANGE":
			if rng != "" {
				return "", "", invalid("%s: Too many range keys specified", what)
			}
			rng = k.AttributeName
		default:
			return "", "", invalid("%s: invalid KeyType %q", what, k.KeyType)
		}
	}
	if hash == "" || len(ks) > 2 {
		return "", "", invalid("%s: No Hash Key specified in schema. All Dynamo DB tables must have exactly one hash key", what)
	}
	return hash, rng, nil
}

// newIndex builds an index definition from a spec.
func (t *tableDef) newIndex(spec indexSpec, local bool) (*indexDef, error) {
	if spec.IndexName == "" || !tableNamePattern.MatchString(spec.IndexName) {
		return nil, invalid("Invalid index name %q", spec.IndexName)
	}
	if t.index(spec.IndexName) != nil {
		return nil, invalid("One or more parameter values were invalid: Duplicate index name: %s", spec.IndexName)
	}
	hash, rng, err := keyNames(spec.KeySchema, "Index "+spec.IndexName)
	if err != nil {
		return nil, err
	}
	if local && hash != t.Hash {
		return nil, invalid("Table KeySchema: The AttributeValue for a key attribute cannot contain an empty string value; local secondary index must have the table's hash key")
	}
	ix := &indexDef{Name: spec.IndexName, Local: local, Hash: hash, Range: rng, Projection: "ALL"}
	if spec.Projection != nil && spec.Projection.ProjectionType != "" {
		switch spec.Projection.ProjectionType {
		case "ALL", "KEYS_ONLY", "INCLUDE":
		default:
			return nil, invalid("Unknown ProjectionType: %s", spec.Projection.ProjectionType)
		}
		ix.Projection = spec.Projection.ProjectionType
		ix.NonKey = spec.Projection.NonKeyAttributes
	}
	if spec.ProvisionedThroughput != nil {
		ix.Read, ix.Write = spec.ProvisionedThroughput.ReadCapacityUnits, spec.ProvisionedThroughput.WriteCapacityUnits
	}
	for _, ex := range t.Indexes {
		if ex.No >= ix.No {
			ix.No = ex.No + 1
		}
	}
	return ix, nil
}

// checkAttributes verifies that the attribute definitions are exactly the
// key attributes of the table and its indexes.
func (t *tableDef) checkAttributes() error {
	used := map[string]bool{t.Hash: true}
	if t.Range != "" {
		used[t.Range] = true
	}
	for _, ix := range t.Indexes {
		used[ix.Hash] = true
		if ix.Range != "" {
			used[ix.Range] = true
		}
	}
	for name := range used {
		typ, ok := t.AttrTypes[name]
		if !ok {
			return invalid("One or more parameter values were invalid: Some index key attributes are not defined in AttributeDefinitions. Keys: [%s], AttributeDefinitions: %v", name, t.AttrOrder)
		}
		if typ != "S" && typ != "N" && typ != "B" {
			return invalid("Member must satisfy enum value set: [B, N, S] (attribute %s)", name)
		}
	}
	if len(used) != len(t.AttrTypes) {
		return invalid("One or more parameter values were invalid: Number of attributes in KeySchema does not exactly match number of attributes defined in AttributeDefinitions")
	}
	return nil
}

func (t *tableDef) defineAttributes(defs []attributeDefinition) error {
	for _, d := range defs {
		if prev, ok := t.AttrTypes[d.AttributeName]; ok && prev != d.AttributeType {
			return invalid("Cannot change the type of attribute %s", d.AttributeName)
		} else if !ok {
			t.AttrOrder = append(t.AttrOrder, d.AttributeName)
		}
		t.AttrTypes[d.AttributeName] = d.AttributeType
	}
	return nil
}

func (s *Server) createTable(body []byte) (any, error) {
	var in struct {
		TableName              string
		KeySchema              []keySchemaElement
		AttributeDefinitions   []attributeDefinition
		BillingMode            string
		ProvisionedThroughput  *throughput
		GlobalSecondaryIndexes []indexSpec
		LocalSecondaryIndexes  []indexSpec
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	if !tableNamePattern.MatchString(in.TableName) {
		return nil, invalid("1 validation error detected: Value '%s' at 'tableName' failed to satisfy constraint: Member must satisfy regular expression pattern: [a-zA-Z0-9_.-]+ and have length between 3 and 255", in.TableName)
	}
	if s.tables[in.TableName] != nil {
		return nil, &dynErr{typ: "ResourceInUseException", msg: "Table already exists: " + in.TableName}
	}
	hash, rng, err := keyNames(in.KeySchema, "Table")
	if err != nil {
		return nil, err
	}
	t := &tableDef{Name: in.TableName, Created: time.Now().UTC(), Hash: hash, Range: rng, AttrTypes: map[string]string{}, BillingMode: in.BillingMode}
	if t.BillingMode == "" {
		t.BillingMode = "PROVISIONED"
	}
	switch t.BillingMode {
	case "PROVISIONED":
		if in.ProvisionedThroughput == nil {
			return nil, invalid("One or more parameter values were invalid: ReadCapacityUnits and WriteCapacityUnits must both be specified when BillingMode is PROVISIONED")
		}
		t.Read, t.Write = in.ProvisionedThroughput.ReadCapacityUnits, in.ProvisionedThroughput.WriteCapacityUnits
	case "PAY_PER_REQUEST":
		if in.ProvisionedThroughput != nil {
			return nil, invalid("One or more parameter values were invalid: Neither ReadCapacityUnits nor WriteCapacityUnits can be specified when BillingMode is PAY_PER_REQUEST")
		}
	default:
		return nil, invalid("Unknown BillingMode %q", in.BillingMode)
	}
	if err := t.defineAttributes(in.AttributeDefinitions); err != nil {
		return nil, err
	}
	if len(in.GlobalSecondaryIndexes) > 20 || len(in.LocalSecondaryIndexes) > 5 {
		return nil, invalid("One or more parameter values were invalid: too many secondary indexes (at most 20 global and 5 local)")
	}
	for _, spec := range in.GlobalSecondaryIndexes {
		ix, err := t.newIndex(spec, false)
		if err != nil {
			return nil, err
		}
		t.Indexes = append(t.Indexes, ix)
	}
	for _, spec := range in.LocalSecondaryIndexes {
		ix, err := t.newIndex(spec, true)
		if err != nil {
			return nil, err
		}
		t.Indexes = append(t.Indexes, ix)
	}
	if err := t.checkAttributes(); err != nil {
		return nil, err
	}
	id, err := s.nextTableID()
	if err != nil {
		return nil, err
	}
	t.ID = id
	b := s.db.NewBatch()
	defer b.Close()
	_ = b.Set([]byte{'n'}, tableIDValue(id), nil)
	if err := s.saveTable(b, t); err != nil {
		return nil, err
	}
	if err := s.commit(b, 0); err != nil {
		return nil, err
	}
	s.tables[t.Name] = t
	return map[string]any{"TableDescription": t.describe("ACTIVE")}, nil
}

// replaceTable durably stores a table's new definition and uses it.
func (s *Server) replaceTable(t *tableDef) error {
	b := s.db.NewBatch()
	defer b.Close()
	if err := s.saveTable(b, t); err != nil {
		return err
	}
	if err := s.commit(b, 0); err != nil {
		return err
	}
	s.tables[t.Name] = t
	return nil
}

func (s *Server) saveTable(b *pebble.Batch, t *tableDef) error {
	raw, err := json.Marshal(t)
	if err != nil {
		return err
	}
	return b.Set(metaKey(t.Name), raw, nil)
}

func (s *Server) deleteTable(body []byte) (any, error) {
	var in struct{ TableName string }
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	t, err := s.table(in.TableName)
	if err != nil {
		return nil, err
	}
	b := s.db.NewBatch()
	defer b.Close()
	for _, kind := range []byte{prefixData, prefixIndex, prefixTTL} {
		p := tablePrefix(kind, t.ID)
		if err := b.DeleteRange(p, prefixEnd(p), nil); err != nil {
			return nil, err
		}
	}
	_ = b.Delete(metaKey(t.Name), nil)
	if err := s.commit(b, 0); err != nil {
		return nil, err
	}
	delete(s.tables, t.Name)
	// The deleted range is dead data: compact it away soon.
	s.deadBytes.Add(64 << 20)
	return map[string]any{"TableDescription": t.describe("DELETING")}, nil
}

func (s *Server) describeTable(body []byte) (any, error) {
	var in struct{ TableName string }
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	t, err := s.table(in.TableName)
	if err != nil {
		return nil, err
	}
	return map[string]any{"Table": t.describe("ACTIVE")}, nil
}

func (s *Server) listTables(body []byte) (any, error) {
	var in struct {
		ExclusiveStartTableName string
		Limit                   *int
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	limit := 100
	if in.Limit != nil {
		if *in.Limit < 1 || *in.Limit > 100 {
			return nil, invalid("1 validation error detected: Value '%d' at 'limit' failed to satisfy constraint: Member must have value less than or equal to 100", *in.Limit)
		}
		limit = *in.Limit
	}
	names := make([]string, 0, len(s.tables))
	for n := range s.tables {
		if n > in.ExclusiveStartTableName {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	out := map[string]any{}
	if len(names) > limit {
		names = names[:limit]
		out["LastEvaluatedTableName"] = names[limit-1]
	}
	out["TableNames"] = names
	return out, nil
}

// updateTable changes the billing mode and adds or removes global
// secondary indexes (an added index is filled from the table's items).
func (s *Server) updateTable(body []byte) (any, error) {
	var in struct {
		TableName                   string
		AttributeDefinitions        []attributeDefinition
		BillingMode                 string
		ProvisionedThroughput       *throughput
		GlobalSecondaryIndexUpdates []struct {
			Create *indexSpec
			Delete *struct{ IndexName string }
			Update *struct {
				IndexName             string
				ProvisionedThroughput *throughput
			}
		}
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	cur, err := s.table(in.TableName)
	if err != nil {
		return nil, err
	}
	// Work on a copy: nothing changes unless everything is valid.
	var t tableDef
	raw, _ := json.Marshal(cur)
	_ = json.Unmarshal(raw, &t)
	if in.BillingMode != "" {
		t.BillingMode = in.BillingMode
	}
	if in.ProvisionedThroughput != nil {
		t.Read, t.Write = in.ProvisionedThroughput.ReadCapacityUnits, in.ProvisionedThroughput.WriteCapacityUnits
	}
	if err := t.defineAttributes(in.AttributeDefinitions); err != nil {
		return nil, err
	}
	var created []*indexDef
	var dropped []*indexDef
	for _, u := range in.GlobalSecondaryIndexUpdates {
		switch {
		case u.Create != nil:
			ix, err := t.newIndex(*u.Create, false)
			if err != nil {
				return nil, err
			}
			t.Indexes = append(t.Indexes, ix)
			created = append(created, ix)
		case u.Delete != nil:
			ix := t.index(u.Delete.IndexName)
			if ix == nil {
				return nil, &dynErr{typ: "ResourceNotFoundException", msg: "Requested resource not found: Index: " + u.Delete.IndexName + " not found"}
			}
			t.Indexes = slices.DeleteFunc(t.Indexes, func(x *indexDef) bool { return x == ix })
			dropped = append(dropped, ix)
		case u.Update != nil:
			ix := t.index(u.Update.IndexName)
			if ix == nil {
				return nil, &dynErr{typ: "ResourceNotFoundException", msg: "Requested resource not found: Index: " + u.Update.IndexName + " not found"}
			}
			if u.Update.ProvisionedThroughput != nil {
				ix.Read, ix.Write = u.Update.ProvisionedThroughput.ReadCapacityUnits, u.Update.ProvisionedThroughput.WriteCapacityUnits
			}
		}
	}
	// Attribute definitions no key uses any more are dropped.
	used := map[string]bool{t.Hash: true, t.Range: true}
	for _, ix := range t.Indexes {
		used[ix.Hash], used[ix.Range] = true, true
	}
	for name := range t.AttrTypes {
		if !used[name] {
			delete(t.AttrTypes, name)
		}
	}
	t.AttrOrder = slices.DeleteFunc(t.AttrOrder, func(n string) bool { return !used[n] })
	if err := t.checkAttributes(); err != nil {
		return nil, err
	}
	for _, ix := range created {
		if err := s.backfill(&t, ix); err != nil {
			return nil, err
		}
	}
	if err := s.replaceTable(&t); err != nil {
		return nil, err
	}
	for _, ix := range dropped {
		p := binary.BigEndian.AppendUint16(tablePrefix(prefixIndex, t.ID), ix.No)
		if err := s.db.DeleteRange(p, prefixEnd(p), pebble.Sync); err != nil {
			return nil, err
		}
	}
	return map[string]any{"TableDescription": t.describe("ACTIVE")}, nil
}

// backfill writes the entries of every item of t for a new index (or, with
// ix nil, the TTL entries). The caller holds s.mu exclusively. The new
// definition is saved after, so a crash halfway leaves entries no
// definition refers to; they are cleared before the next backfill.
func (s *Server) backfill(t *tableDef, ix *indexDef) error {
	var p []byte
	if ix != nil {
		p = binary.BigEndian.AppendUint16(tablePrefix(prefixIndex, t.ID), ix.No)
	} else {
		p = tablePrefix(prefixTTL, t.ID)
	}
	if err := s.db.DeleteRange(p, prefixEnd(p), pebble.NoSync); err != nil {
		return err
	}
	dp := tablePrefix(prefixData, t.ID)
	iter, err := s.db.NewIter(&pebble.IterOptions{LowerBound: dp, UpperBound: prefixEnd(dp)})
	if err != nil {
		return err
	}
	defer iter.Close()
	b := s.db.NewBatch()
	flush := func() error {
		if b.Empty() {
			return nil
		}
		// Index entries written: cut the dead ranges they fall in, as
		// commit does.
		ws := writeSetOf(b)
		s.dead.cut(ws)
		err := b.Commit(pebble.Sync)
		s.dead.cut(ws)
		b.Close()
		b = s.db.NewBatch()
		return err
	}
	defer func() { b.Close() }()
	for ok := iter.First(); ok; ok = iter.Next() {
		var it item
		if err := json.Unmarshal(iter.Value(), &it); err != nil {
			return err
		}
		dk := append([]byte(nil), iter.Key()...)
		var k, v []byte
		if ix != nil {
			k, err = t.indexKey(ix, it, dk)
			if err == errNoIndexKey {
				continue
			}
			if err != nil {
				return invalid("%s IndexName: %s (item %s)", err.Error(), ix.Name, itemJSON(t.keyAttrs(it)))
			}
			v = appendItemJSON(nil, t.project(ix, it))
		} else {
			exp, ok := t.expiry(it)
			if !ok {
				continue
			}
			k, v = t.ttlKey(exp, dk), dk
		}
		if err := b.Set(k, v, nil); err != nil {
			return err
		}
		if b.Count() >= 1000 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := iter.Error(); err != nil {
		return err
	}
	return flush()
}

func (t *tableDef) describe(status string) map[string]any {
	arn := fmt.Sprintf("arn:aws:dynamodb:us-east-1:000000000000:table/%s", t.Name)
	keySchema := func(hash, rng string) []keySchemaElement {
		ks := []keySchemaElement{{hash, "HASH"}}
		if rng != "" {
			ks = append(ks, keySchemaElement{rng, "RANGE"})
		}
		return ks
	}
	attrs := make([]attributeDefinition, 0, len(t.AttrOrder))
	for _, n := range t.AttrOrder {
		attrs = append(attrs, attributeDefinition{n, t.AttrTypes[n]})
	}
	d := map[string]any{
		"TableName":            t.Name,
		"TableStatus":          status,
		"TableArn":             arn,
		"TableId":              fmt.Sprintf("00000000-0000-0000-0000-%012d", t.ID),
		"KeySchema":            keySchema(t.Hash, t.Range),
		"AttributeDefinitions": attrs,
		"CreationDateTime":     float64(t.Created.UnixMilli()) / 1000,
		"ItemCount":            0,
		"TableSizeBytes":       0,
		"BillingModeSummary":   map[string]any{"BillingMode": t.BillingMode},
		"ProvisionedThroughput": map[string]any{
			"ReadCapacityUnits": t.Read, "WriteCapacityUnits": t.Write, "NumberOfDecreasesToday": 0,
		},
	}
	var gsis, lsis []map[string]any
	for _, ix := range t.Indexes {
		proj := map[string]any{"ProjectionType": ix.Projection}
		if len(ix.NonKey) > 0 {
			proj["NonKeyAttributes"] = ix.NonKey
		}
		x := map[string]any{
			"IndexName": ix.Name, "KeySchema": keySchema(ix.Hash, ix.Range), "Projection": proj,
			"IndexArn": arn + "/index/" + ix.Name, "ItemCount": 0, "IndexSizeBytes": 0,
		}
		if ix.Local {
			lsis = append(lsis, x)
			continue
		}
		x["IndexStatus"] = "ACTIVE"
		x["ProvisionedThroughput"] = map[string]any{"ReadCapacityUnits": ix.Read, "WriteCapacityUnits": ix.Write, "NumberOfDecreasesToday": 0}
		gsis = append(gsis, x)
	}
	if gsis != nil {
		d["GlobalSecondaryIndexes"] = gsis
	}
	if lsis != nil {
		d["LocalSecondaryIndexes"] = lsis
	}
	return d
}

func (s *Server) updateTimeToLive(body []byte) (any, error) {
	var in struct {
		TableName               string
		TimeToLiveSpecification *struct {
			AttributeName string
			Enabled       *bool
		}
	}
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	t, err := s.table(in.TableName)
	if err != nil {
		return nil, err
	}
	spec := in.TimeToLiveSpecification
	if spec == nil || spec.Enabled == nil || spec.AttributeName == "" {
		return nil, invalid("1 validation error detected: TimeToLiveSpecification needs AttributeName and Enabled")
	}
	switch {
	case *spec.Enabled && t.TTLAttr != "":
		return nil, invalid("TimeToLive is already enabled")
	case !*spec.Enabled && t.TTLAttr == "":
		return nil, invalid("TimeToLive is already disabled")
	case !*spec.Enabled && t.TTLAttr != spec.AttributeName:
		return nil, invalid("TimeToLive is active on a different AttributeName: current AttributeName is %s", t.TTLAttr)
	}
	next := *t
	if *spec.Enabled {
		next.TTLAttr = spec.AttributeName
		if err := s.backfill(&next, nil); err != nil {
			return nil, err
		}
	} else {
		next.TTLAttr = ""
		p := tablePrefix(prefixTTL, t.ID)
		if err := s.db.DeleteRange(p, prefixEnd(p), pebble.NoSync); err != nil {
			return nil, err
		}
	}
	if err := s.replaceTable(&next); err != nil {
		return nil, err
	}
	return map[string]any{"TimeToLiveSpecification": map[string]any{"AttributeName": spec.AttributeName, "Enabled": *spec.Enabled}}, nil
}

func (s *Server) describeTimeToLive(body []byte) (any, error) {
	var in struct{ TableName string }
	if err := decode(body, &in); err != nil {
		return nil, err
	}
	t, err := s.table(in.TableName)
	if err != nil {
		return nil, err
	}
	d := map[string]any{"TimeToLiveStatus": "DISABLED"}
	if t.TTLAttr != "" {
		d = map[string]any{"TimeToLiveStatus": "ENABLED", "AttributeName": t.TTLAttr}
	}
	return map[string]any{"TimeToLiveDescription": d}, nil
}
