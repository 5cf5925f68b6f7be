package localdynamo

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
)

// tableMeta is what Server knows about a table besides minidyn: what minidyn
// does not keep (TTL, attribute types for descriptions) and the requests
// that defined the table, from which compaction rebuilds it.
type tableMeta struct {
	name        string
	keySchema   []keySchemaElement // HASH first
	attrTypes   map[string]string  // attribute name -> S, N or B
	attrOrder   []string           // attribute names in definition order
	billingMode string
	ttl         ttlSetting
	// schema holds the CreateTable request and every UpdateTable request
	// journaled since, in order.
	schema []record
}

type keySchemaElement struct {
	AttributeName string
	KeyType       string
}

type attributeDefinition struct {
	AttributeName string
	AttributeType string
}

type ttlSetting struct {
	enabled   bool
	attribute string
}

func (m *tableMeta) defineAttributes(defs []attributeDefinition) {
	for _, d := range defs {
		if _, ok := m.attrTypes[d.AttributeName]; !ok {
			m.attrOrder = append(m.attrOrder, d.AttributeName)
		}
		m.attrTypes[d.AttributeName] = d.AttributeType
	}
}

func (m *tableMeta) attributeDefinitions() []attributeDefinition {
	out := make([]attributeDefinition, 0, len(m.attrOrder))
	for _, n := range m.attrOrder {
		out = append(out, attributeDefinition{AttributeName: n, AttributeType: m.attrTypes[n]})
	}
	return out
}

// keyOf extracts the primary key attributes from an item.
func (m *tableMeta) keyOf(item map[string]json.RawMessage) (map[string]json.RawMessage, bool) {
	key := make(map[string]json.RawMessage, len(m.keySchema))
	for _, k := range m.keySchema {
		v, ok := item[k.AttributeName]
		if !ok {
			return nil, false
		}
		key[k.AttributeName] = v
	}
	return key, true
}

// checkKey verifies that item has the table's key attributes with their
// defined types; exact also requires it to have nothing else. It returns a
// string identifying the key, for duplicate detection.
func (m *tableMeta) checkKey(item map[string]json.RawMessage, exact bool) (string, error) {
	if exact && len(item) != len(m.keySchema) {
		return "", fmt.Errorf("the provided key element does not match the schema")
	}
	var id bytes.Buffer
	for _, k := range m.keySchema {
		raw, ok := item[k.AttributeName]
		if !ok {
			return "", fmt.Errorf("one of the required keys was not given a value: missing %s", k.AttributeName)
		}
		var v map[string]json.RawMessage
		if err := json.Unmarshal(raw, &v); err != nil || len(v) != 1 {
			return "", fmt.Errorf("invalid attribute value for key %s", k.AttributeName)
		}
		want := m.attrTypes[k.AttributeName]
		val, ok := v[want]
		if !ok {
			return "", fmt.Errorf("the provided key element does not match the schema: %s must be of type %s", k.AttributeName, want)
		}
		id.WriteString(k.AttributeName)
		id.WriteByte(0)
		if err := json.Compact(&id, val); err != nil {
			return "", fmt.Errorf("invalid attribute value for key %s", k.AttributeName)
		}
		id.WriteByte(0)
	}
	return id.String(), nil
}

// tableDefinition is the part of CreateTable and UpdateTable requests that
// Server tracks.
type tableDefinition struct {
	TableName            string
	AttributeDefinitions []attributeDefinition
	KeySchema            []keySchemaElement
	BillingMode          string
}

// afterTableChange updates table metadata after minidyn answered a
// CreateTable, UpdateTable or DeleteTable, and completes the table
// description in the response. rec is the journal record of the request,
// if any; it is kept for compaction.
func (s *Server) afterTableChange(op string, body []byte, res response, rec *record) response {
	var def tableDefinition
	switch op {
	case "CreateTable", "UpdateTable", "DeleteTable":
		if err := json.Unmarshal(body, &def); err != nil {
			return res
		}
	default:
		return res
	}
	switch op {
	case "CreateTable":
		if !res.ok() {
			return res
		}
		m := &tableMeta{name: def.TableName, attrTypes: map[string]string{}, billingMode: def.BillingMode}
		if m.billingMode == "" {
			m.billingMode = "PROVISIONED"
		}
		for _, k := range def.KeySchema {
			if k.KeyType == "HASH" {
				m.keySchema = append([]keySchemaElement{k}, m.keySchema...)
			} else {
				m.keySchema = append(m.keySchema, k)
			}
		}
		m.defineAttributes(def.AttributeDefinitions)
		m.schema = append(m.schema, *rec)
		s.tables[def.TableName] = m
		res.body = s.completeDescription(res.body, "TableDescription", "ACTIVE")
	case "UpdateTable":
		m := s.tables[def.TableName]
		if m == nil || rec == nil {
			return res
		}
		// minidyn applies AttributeDefinitions even when an index change
		// then fails.
		m.defineAttributes(def.AttributeDefinitions)
		if res.ok() && def.BillingMode != "" {
			m.billingMode = def.BillingMode
		}
		m.schema = append(m.schema, *rec)
		if res.ok() {
			res.body = s.completeDescription(res.body, "TableDescription", "ACTIVE")
		}
	case "DeleteTable":
		if !res.ok() {
			return res
		}
		res.body = s.completeDescription(res.body, "TableDescription", "DELETING")
		delete(s.tables, def.TableName)
	}
	return res
}

// completeDescription fills in the parts of a table description (the
// object under field in a response) that minidyn leaves empty, and drops
// its null members.
func (s *Server) completeDescription(body []byte, field, status string) []byte {
	if s.replaying {
		return body
	}
	var outer map[string]json.RawMessage
	if json.Unmarshal(body, &outer) != nil {
		return body
	}
	dec := json.NewDecoder(bytes.NewReader(outer[field]))
	dec.UseNumber()
	var desc map[string]any
	if dec.Decode(&desc) != nil || desc == nil {
		return body
	}
	dropEmpty(desc)
	if st, _ := desc["TableStatus"].(string); st == "" {
		desc["TableStatus"] = status
	}
	name, _ := desc["TableName"].(string)
	if m := s.tables[name]; m != nil {
		desc["AttributeDefinitions"] = m.attributeDefinitions()
		desc["BillingModeSummary"] = map[string]string{"BillingMode": m.billingMode}
		desc["TableArn"] = "arn:aws:dynamodb:us-east-1:000000000000:table/" + name
	}
	b, err := json.Marshal(desc)
	if err != nil {
		return body
	}
	outer[field] = b
	out, err := json.Marshal(outer)
	if err != nil {
		return body
	}
	return out
}

// dropEmpty removes null and empty-string members from JSON objects,
// recursively.
func dropEmpty(v any) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if s, ok := e.(string); e == nil || ok && s == "" {
				delete(v, k)
				continue
			}
			dropEmpty(e)
		}
	case []any:
		for _, e := range v {
			dropEmpty(e)
		}
	}
}

// updateTimeToLive implements UpdateTimeToLive, which minidyn lacks. The
// setting is remembered per table; expired items are not deleted.
func (s *Server) updateTimeToLive(body []byte) (response, *record) {
	var in struct {
		TableName               *string
		TimeToLiveSpecification *struct {
			AttributeName *string
			Enabled       *bool
		}
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return errorResponse(http.StatusBadRequest, "SerializationException", err.Error()), nil
	}
	spec := in.TimeToLiveSpecification
	switch {
	case in.TableName == nil || *in.TableName == "":
		return validationError("1 validation error detected: Value null at 'tableName' failed to satisfy constraint: Member must not be null"), nil
	case spec == nil:
		return validationError("1 validation error detected: Value null at 'timeToLiveSpecification' failed to satisfy constraint: Member must not be null"), nil
	case spec.AttributeName == nil || *spec.AttributeName == "":
		return validationError("1 validation error detected: Value null at 'timeToLiveSpecification.attributeName' failed to satisfy constraint: Member must not be null"), nil
	case spec.Enabled == nil:
		return validationError("1 validation error detected: Value null at 'timeToLiveSpecification.enabled' failed to satisfy constraint: Member must not be null"), nil
	}
	m := s.tables[*in.TableName]
	if m == nil {
		return resourceNotFound(fmt.Sprintf("Requested resource not found: Table: %s not found", *in.TableName)), nil
	}
	attr := *spec.AttributeName
	if *spec.Enabled {
		if m.ttl.enabled {
			return validationError("TimeToLive is already enabled"), nil
		}
		m.ttl = ttlSetting{enabled: true, attribute: attr}
	} else {
		if !m.ttl.enabled {
			return validationError("TimeToLive is already disabled"), nil
		}
		if m.ttl.attribute != attr {
			return validationError("TimeToLive is active on a different AttributeName: current AttributeName is " + m.ttl.attribute), nil
		}
		m.ttl = ttlSetting{}
	}
	res := jsonResponse(map[string]any{
		"TimeToLiveSpecification": map[string]any{"AttributeName": attr, "Enabled": *spec.Enabled},
	})
	return res, &record{flag: flagApplied, op: "UpdateTimeToLive", body: body}
}

// ttlRecord is the UpdateTimeToLive request that recreates m's TTL setting.
func (m *tableMeta) ttlRecord() (record, bool) {
	if !m.ttl.enabled {
		return record{}, false
	}
	b, _ := json.Marshal(map[string]any{
		"TableName":               m.name,
		"TimeToLiveSpecification": map[string]any{"AttributeName": m.ttl.attribute, "Enabled": true},
	})
	return record{flag: flagApplied, op: "UpdateTimeToLive", body: b}, true
}

// describeTimeToLive implements DescribeTimeToLive.
func (s *Server) describeTimeToLive(body []byte) response {
	var in struct{ TableName *string }
	if err := json.Unmarshal(body, &in); err != nil {
		return errorResponse(http.StatusBadRequest, "SerializationException", err.Error())
	}
	if in.TableName == nil || *in.TableName == "" {
		return validationError("1 validation error detected: Value null at 'tableName' failed to satisfy constraint: Member must not be null")
	}
	m := s.tables[*in.TableName]
	if m == nil {
		return resourceNotFound(fmt.Sprintf("Requested resource not found: Table: %s not found", *in.TableName))
	}
	desc := map[string]any{"TimeToLiveStatus": "DISABLED"}
	if m.ttl.enabled {
		desc = map[string]any{"TimeToLiveStatus": "ENABLED", "AttributeName": m.ttl.attribute}
	}
	return jsonResponse(map[string]any{"TimeToLiveDescription": desc})
}

// listTables implements ListTables, which minidyn lacks.
func (s *Server) listTables(body []byte) response {
	var in struct {
		ExclusiveStartTableName string
		Limit                   *int
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return errorResponse(http.StatusBadRequest, "SerializationException", err.Error())
	}
	limit := 100
	if in.Limit != nil {
		limit = *in.Limit
		if limit < 1 || limit > 100 {
			return validationError(fmt.Sprintf("1 validation error detected: Value '%d' at 'limit' failed to satisfy constraint: Member must have value between 1 and 100", limit))
		}
	}
	names := make([]string, 0, len(s.tables))
	for n := range s.tables {
		if n > in.ExclusiveStartTableName {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	out := map[string]any{}
	if len(names) > limit {
		names = names[:limit]
		out["LastEvaluatedTableName"] = names[limit-1]
	}
	out["TableNames"] = names
	return jsonResponse(out)
}

// batchWriteItem forwards BatchWriteItem to minidyn one table at a time, in
// table-name order, after checking what DynamoDB checks before writing
// anything: shapes, table existence, key attributes and duplicate keys.
// minidyn itself would iterate the tables in map order and stop at the first
// failure, leaving a partial write that could not be replayed exactly.
func (s *Server) batchWriteItem(body []byte) (response, *record) {
	type writeRequest struct {
		PutRequest *struct {
			Item map[string]json.RawMessage
		}
		DeleteRequest *struct {
			Key map[string]json.RawMessage
		}
	}
	var in struct {
		RequestItems map[string][]json.RawMessage
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return errorResponse(http.StatusBadRequest, "SerializationException", err.Error()), nil
	}
	if len(in.RequestItems) == 0 {
		return validationError("1 validation error detected: Value null at 'requestItems' failed to satisfy constraint: Member must have length greater than or equal to 1"), nil
	}
	names := make([]string, 0, len(in.RequestItems))
	total := 0
	for name, reqs := range in.RequestItems {
		names = append(names, name)
		total += len(reqs)
		if len(reqs) == 0 {
			return validationError("1 validation error detected: Value at 'requestItems' failed to satisfy constraint: Map value must satisfy constraint: [Member must have length greater than or equal to 1]"), nil
		}
	}
	if total > 25 {
		return validationError("Too many items requested for the BatchWriteItem call"), nil
	}
	slices.Sort(names)

	seen := map[string]bool{}
	for _, name := range names {
		m := s.tables[name]
		if m == nil {
			return resourceNotFound("Requested resource not found"), nil
		}
		for _, raw := range in.RequestItems[name] {
			var wr writeRequest
			if err := json.Unmarshal(raw, &wr); err != nil {
				return errorResponse(http.StatusBadRequest, "SerializationException", err.Error()), nil
			}
			var id string
			var err error
			switch {
			case wr.PutRequest != nil && wr.DeleteRequest == nil:
				id, err = m.checkKey(wr.PutRequest.Item, false)
			case wr.DeleteRequest != nil && wr.PutRequest == nil:
				id, err = m.checkKey(wr.DeleteRequest.Key, true)
			default:
				return validationError("a WriteRequest must contain exactly one of PutRequest or DeleteRequest"), nil
			}
			if err != nil {
				return validationError(err.Error()), nil
			}
			id = name + "\x00" + id
			if seen[id] {
				return validationError("Provided list of item keys contains duplicates"), nil
			}
			seen[id] = true
		}
	}

	for _, name := range names {
		sub, err := json.Marshal(map[string]any{"RequestItems": map[string][]json.RawMessage{name: in.RequestItems[name]}})
		if err != nil {
			return errorResponse(http.StatusBadRequest, "SerializationException", err.Error()), nil
		}
		if res := s.callMini("BatchWriteItem", sub); !res.ok() {
			// Earlier tables, and earlier requests for this one, are written.
			return res, &record{flag: flagFailed, op: "BatchWriteItem", body: body}
		}
	}
	return response{status: http.StatusOK, body: []byte(`{"UnprocessedItems":{}}`)},
		&record{flag: flagApplied, op: "BatchWriteItem", body: body}
}
