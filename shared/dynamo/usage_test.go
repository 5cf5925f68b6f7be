package dynamo_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/dynamo"
)

// TestUsageCountsConsumedCapacity: the store's client asks every call of a
// counted context for its ConsumedCapacity (Scan included) and sums the
// answer into reads and writes, the units DynamoDB's rules give (a small
// item: 1 write unit, 1 read unit consistent, half eventual).
func TestUsageCountsConsumedCapacity(t *testing.T) {
	p := apitest.New(t).Platform
	db, table := p.Store.Client(), p.Env.Table
	ctx, u := dynamo.WithUsage(context.Background())
	key := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "USAGETEST"}, "sk": &types.AttributeValueMemberS{Value: "1"}}
	it := map[string]types.AttributeValue{"pk": key["pk"], "sk": key["sk"], "d": &types.AttributeValueMemberS{Value: strings.Repeat("x", 100)}}
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: it}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key, ConsistentRead: aws.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(table), KeyConditionExpression: aws.String("pk = :p"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": key["pk"]}}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table), Limit: aws.Int32(1),
		FilterExpression: aws.String("pk = :p"), ExpressionAttributeValues: map[string]types.AttributeValue{":p": key["pk"]}}); err != nil {
		t.Fatal(err)
	}
	if u.WriteUnits != 1 || u.ReadUnits != 1+0.5+0.5 || u.Calls("") != 4 || u.Calls("Scan") != 1 {
		t.Fatalf("usage %s: %.1f write units (want 1), %.1f read units (want 2)", u, u.WriteUnits, u.ReadUnits)
	}
}
