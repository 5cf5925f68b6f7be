package localdynamo

import (
	"errors"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/botforge/platform/shared/mototest"
)

// TestConsumedCapacityAsMoto asks moto_server and the embedded DynamoDB
// the same requests with ReturnConsumedCapacity TOTAL, where moto's
// figures are DynamoDB's (small items: a put or delete 1 unit, an eventual
// get 0.5, a consistent query or scan page 1, a transactional get 2 per
// item): both answer the same table and units, and refuse an unknown value
// with the same message. (moto gives constants, not sizes: the size rules
// are TestCapacityUnits'. Nor does it charge a transactional read of a
// missing item, which DynamoDB does: the items read here exist.)
func TestConsumedCapacityAsMoto(t *testing.T) {
	moto := newClient(mototest.Start(t))
	local := openEnv(t, t.TempDir()).db
	table := aws.String("tbl")
	total := types.ReturnConsumedCapacityTotal
	type answer struct {
		cc  []types.ConsumedCapacity
		err error
	}
	for _, db := range []*dynamodb.Client{moto, local} {
		createTable(t, db, "tbl")
		if _, err := db.PutItem(ctx(), &dynamodb.PutItemInput{TableName: table, Item: keyOf("A", "2")}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		run  func(db *dynamodb.Client) answer
	}{
		{"PutItem", func(db *dynamodb.Client) answer {
			r, err := db.PutItem(ctx(), &dynamodb.PutItemInput{TableName: table, Item: keyOf("A", "1"), ReturnConsumedCapacity: total})
			return answer{answeredCapacity(r), err}
		}},
		{"GetItem", func(db *dynamodb.Client) answer {
			r, err := db.GetItem(ctx(), &dynamodb.GetItemInput{TableName: table, Key: keyOf("A", "1"), ReturnConsumedCapacity: total})
			return answer{answeredCapacity(r), err}
		}},
		{"Query", func(db *dynamodb.Client) answer {
			r, err := db.Query(ctx(), &dynamodb.QueryInput{TableName: table, KeyConditionExpression: aws.String("pk = :p"), ConsistentRead: aws.Bool(true),
				ExpressionAttributeValues: map[string]types.AttributeValue{":p": s("A")}, ReturnConsumedCapacity: total})
			return answer{answeredCapacity(r), err}
		}},
		{"Scan", func(db *dynamodb.Client) answer {
			r, err := db.Scan(ctx(), &dynamodb.ScanInput{TableName: table, ConsistentRead: aws.Bool(true), ReturnConsumedCapacity: total})
			return answer{answeredCapacity(r), err}
		}},
		{"TransactGetItems", func(db *dynamodb.Client) answer {
			r, err := db.TransactGetItems(ctx(), &dynamodb.TransactGetItemsInput{ReturnConsumedCapacity: total, TransactItems: []types.TransactGetItem{
				{Get: &types.Get{TableName: table, Key: keyOf("A", "1")}}, {Get: &types.Get{TableName: table, Key: keyOf("A", "2")}}}})
			return answer{answeredCapacity(r), err}
		}},
		{"DeleteItem", func(db *dynamodb.Client) answer {
			r, err := db.DeleteItem(ctx(), &dynamodb.DeleteItemInput{TableName: table, Key: keyOf("A", "1"), ReturnConsumedCapacity: total})
			return answer{answeredCapacity(r), err}
		}},
		{"unknown value", func(db *dynamodb.Client) answer {
			_, err := db.GetItem(ctx(), &dynamodb.GetItemInput{TableName: table, Key: keyOf("A", "1"), ReturnConsumedCapacity: "ALL"})
			return answer{err: err}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, l := tc.run(moto), tc.run(local)
			if (m.err == nil) != (l.err == nil) || (m.err != nil && apiMessage(m.err) != apiMessage(l.err)) {
				t.Fatalf("errors: moto %v, embedded %v", m.err, l.err)
			}
			if len(m.cc) != len(l.cc) {
				t.Fatalf("moto answered %d ConsumedCapacity, the embedded DynamoDB %d", len(m.cc), len(l.cc))
			}
			for i := range m.cc {
				mc, lc := m.cc[i], l.cc[i]
				if aws.ToString(mc.TableName) != aws.ToString(lc.TableName) || aws.ToFloat64(mc.CapacityUnits) != aws.ToFloat64(lc.CapacityUnits) ||
					(mc.ReadCapacityUnits != nil && aws.ToFloat64(mc.ReadCapacityUnits) != aws.ToFloat64(lc.ReadCapacityUnits)) {
					t.Errorf("moto %s, embedded %s", capacityJSON([]types.ConsumedCapacity{mc}), capacityJSON([]types.ConsumedCapacity{lc}))
				}
			}
		})
	}
}

// apiMessage is an error's API code and message, without the request id.
func apiMessage(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode() + ": " + ae.ErrorMessage()
	}
	return fmt.Sprint(err)
}
