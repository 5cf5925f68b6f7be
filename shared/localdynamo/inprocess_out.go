package localdynamo

import (
	"bytes"
	"fmt"

	sdk "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	sdktypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/truora/minidyn/types"
)

// sdkOutput converts an operation's answer (what toResponse would encode
// as JSON: a map, or "{}") to the SDK's typed output, as the SDK's
// deserializer would read that JSON (TestInProcessMatchesHTTP).
func sdkOutput(op string, v any) (any, error) {
	m, _ := v.(map[string]any) // json.RawMessage("{}"): nothing
	switch op {
	case "GetItem":
		return &sdk.GetItemOutput{Item: outItem(m["Item"]), ConsumedCapacity: outCapacity(m["ConsumedCapacity"])}, nil
	case "PutItem":
		return &sdk.PutItemOutput{Attributes: outItem(m["Attributes"]), ConsumedCapacity: outCapacity(m["ConsumedCapacity"])}, nil
	case "DeleteItem":
		return &sdk.DeleteItemOutput{Attributes: outItem(m["Attributes"]), ConsumedCapacity: outCapacity(m["ConsumedCapacity"])}, nil
	case "UpdateItem":
		return &sdk.UpdateItemOutput{Attributes: outItem(m["Attributes"]), ConsumedCapacity: outCapacity(m["ConsumedCapacity"])}, nil
	case "Query":
		o := &sdk.QueryOutput{ConsumedCapacity: outCapacity(m["ConsumedCapacity"]), LastEvaluatedKey: outItem(m["LastEvaluatedKey"])}
		o.Count, o.ScannedCount, o.Items = outPage(m)
		return o, nil
	case "Scan":
		o := &sdk.ScanOutput{ConsumedCapacity: outCapacity(m["ConsumedCapacity"]), LastEvaluatedKey: outItem(m["LastEvaluatedKey"])}
		o.Count, o.ScannedCount, o.Items = outPage(m)
		return o, nil
	case "BatchGetItem":
		o := &sdk.BatchGetItemOutput{ConsumedCapacity: outCapacities(m["ConsumedCapacity"])}
		if rs, ok := m["Responses"].(map[string][]jsonItem); ok {
			o.Responses = make(map[string][]map[string]sdktypes.AttributeValue, len(rs))
			for name, items := range rs {
				o.Responses[name] = outItems(items)
			}
		}
		if _, ok := m["UnprocessedKeys"]; ok {
			o.UnprocessedKeys = map[string]sdktypes.KeysAndAttributes{} // the engine leaves none
		}
		return o, nil
	case "BatchWriteItem":
		o := &sdk.BatchWriteItemOutput{ConsumedCapacity: outCapacities(m["ConsumedCapacity"])}
		if _, ok := m["UnprocessedItems"]; ok {
			o.UnprocessedItems = map[string][]sdktypes.WriteRequest{} // the engine leaves none
		}
		return o, nil
	case "TransactWriteItems":
		return &sdk.TransactWriteItemsOutput{ConsumedCapacity: outCapacities(m["ConsumedCapacity"])}, nil
	case "TransactGetItems":
		o := &sdk.TransactGetItemsOutput{ConsumedCapacity: outCapacities(m["ConsumedCapacity"])}
		if rs, ok := m["Responses"].([]map[string]any); ok {
			o.Responses = make([]sdktypes.ItemResponse, len(rs))
			for i, r := range rs {
				o.Responses[i].Item = outItem(r["Item"])
			}
		}
		return o, nil
	}
	return nil, fmt.Errorf("localdynamo: no in-process output for %s", op)
}

func outPage(m map[string]any) (count, scanned int32, items []map[string]sdktypes.AttributeValue) {
	n, _ := m["Count"].(int64)
	sc, _ := m["ScannedCount"].(int64)
	if it, ok := m["Items"].([]jsonItem); ok {
		items = outItems(it)
	}
	return int32(n), int32(sc), items
}

func outItems(its []jsonItem) []map[string]sdktypes.AttributeValue {
	out := make([]map[string]sdktypes.AttributeValue, len(its))
	for i, it := range its {
		out[i] = sdkItem(item(it))
	}
	return out
}

func outItem(v any) map[string]sdktypes.AttributeValue {
	it, ok := v.(jsonItem)
	if !ok {
		return nil
	}
	return sdkItem(item(it))
}

// sdkItem converts an item to the SDK's values (as appendItemJSON would
// encode it and the SDK decode it).
func sdkItem(it item) map[string]sdktypes.AttributeValue {
	out := make(map[string]sdktypes.AttributeValue, len(it))
	for k, v := range it {
		out[k] = sdkValue(v)
	}
	return out
}

func sdkStrings(ss []*string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = *s
	}
	return out
}

func sdkValue(v *types.Item) sdktypes.AttributeValue {
	switch {
	case v == nil:
		return &sdktypes.AttributeValueMemberNULL{Value: true}
	case v.S != nil:
		return &sdktypes.AttributeValueMemberS{Value: *v.S}
	case v.N != nil:
		return &sdktypes.AttributeValueMemberN{Value: *v.N}
	case v.B != nil:
		return &sdktypes.AttributeValueMemberB{Value: bytes.Clone(v.B)}
	case v.BOOL != nil:
		return &sdktypes.AttributeValueMemberBOOL{Value: *v.BOOL}
	case v.NULL != nil:
		return &sdktypes.AttributeValueMemberNULL{Value: true}
	case v.SS != nil:
		return &sdktypes.AttributeValueMemberSS{Value: sdkStrings(v.SS)}
	case v.NS != nil:
		return &sdktypes.AttributeValueMemberNS{Value: sdkStrings(v.NS)}
	case v.BS != nil:
		bs := make([][]byte, len(v.BS))
		for i, b := range v.BS {
			bs[i] = bytes.Clone(b)
		}
		return &sdktypes.AttributeValueMemberBS{Value: bs}
	case v.L != nil:
		l := make([]sdktypes.AttributeValue, len(v.L))
		for i, e := range v.L {
			l[i] = sdkValue(e)
		}
		return &sdktypes.AttributeValueMemberL{Value: l}
	case v.M != nil:
		return &sdktypes.AttributeValueMemberM{Value: sdkItem(v.M)}
	}
	return &sdktypes.AttributeValueMemberNULL{Value: true}
}

func outCapacity(v any) *sdktypes.ConsumedCapacity {
	c, ok := v.(capacity)
	if !ok {
		return nil
	}
	o := sdkCapacity(c)
	return &o
}

func outCapacities(v any) []sdktypes.ConsumedCapacity {
	cs, ok := v.([]capacity)
	if !ok {
		return nil
	}
	out := make([]sdktypes.ConsumedCapacity, len(cs))
	for i, c := range cs {
		out[i] = sdkCapacity(c)
	}
	return out
}

func sdkCapacity(c capacity) sdktypes.ConsumedCapacity {
	o := sdktypes.ConsumedCapacity{TableName: &c.TableName, CapacityUnits: &c.CapacityUnits,
		ReadCapacityUnits: floatp(c.ReadCapacityUnits), WriteCapacityUnits: floatp(c.WriteCapacityUnits)}
	if c.Table != nil {
		t := sdkPart(*c.Table)
		o.Table = &t
	}
	if c.GlobalSecondaryIndexes != nil {
		o.GlobalSecondaryIndexes = make(map[string]sdktypes.Capacity, len(c.GlobalSecondaryIndexes))
		for k, p := range c.GlobalSecondaryIndexes {
			o.GlobalSecondaryIndexes[k] = sdkPart(p)
		}
	}
	if c.LocalSecondaryIndexes != nil {
		o.LocalSecondaryIndexes = make(map[string]sdktypes.Capacity, len(c.LocalSecondaryIndexes))
		for k, p := range c.LocalSecondaryIndexes {
			o.LocalSecondaryIndexes[k] = sdkPart(p)
		}
	}
	return o
}

func sdkPart(p capacityPart) sdktypes.Capacity {
	u := p.CapacityUnits
	return sdktypes.Capacity{CapacityUnits: &u, ReadCapacityUnits: floatp(p.ReadCapacityUnits), WriteCapacityUnits: floatp(p.WriteCapacityUnits)}
}

func floatp(p *float64) *float64 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
