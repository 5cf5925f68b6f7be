package localdynamo

import (
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// PartitionKeys lists each partition under the prefix once, whatever its
// item count, and none outside it (keys sharing the prefix's bytes only
// up to a point, a key holding a 0 byte, the prefix itself as a key).
func TestPartitionKeys(t *testing.T) {
	e := openEnv(t, t.TempDir())
	createTable(t, e.db, "tab")
	put := func(pk, sk string) {
		t.Helper()
		_, err := e.db.PutItem(ctx(), &dynamodb.PutItemInput{TableName: aws.String("tab"), Item: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: pk}, "sk": &types.AttributeValueMemberS{Value: sk}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, sk := range []string{"a", "b", "c"} {
		put("OUTBOX#b1#c1", sk)
		put("OUTBOX#b1#c2", sk)
	}
	put("OUTBOX#b2#z\x00x", "a")
	put("OUTBOX#b2#z\x00x", "b")
	put("OUTBOX", "a")      // the prefix without its '#': not under it
	put("OUTBOW#x", "a")    // sorts right after
	put("OUTBOX\x00#", "a") // shares the bytes before the escape
	put("MSG#b1#m", "MSG")
	put("USER#b1#u", "USER")
	got, err := e.srv.PartitionKeys("tab", "OUTBOX#")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"OUTBOX#b1#c1", "OUTBOX#b1#c2", "OUTBOX#b2#z\x00x"}
	if !slices.Equal(got, want) {
		t.Fatalf("PartitionKeys = %q, want %q", got, want)
	}
	if got, err := e.srv.PartitionKeys("tab", "NONE#"); err != nil || len(got) != 0 {
		t.Fatalf("PartitionKeys(NONE#) = %q, %v; want none", got, err)
	}
	if _, err := e.srv.PartitionKeys("missing", "OUTBOX#"); err == nil {
		t.Fatal("PartitionKeys of a missing table: no error")
	}
}
