package dynamo_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/mototest"
)

// TestSweeperRunOnMoto: the scheduled sweep's query of every pending
// deletion runs on moto_server, which checks key conditions as DynamoDB
// does (an empty string in a key condition is refused there, and was the
// sweep's "every marker" prefix).
func TestSweeperRunOnMoto(t *testing.T) {
	db := dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String(mototest.Start(t)),
		Credentials: credentials.NewStaticCredentialsProvider("local", "local", ""), HTTPClient: &http.Client{Timeout: 30 * time.Second}})
	ctx := context.Background()
	if err := dynamo.EnsureTable(ctx, db, "sweep"); err != nil {
		t.Fatal(err)
	}
	w := &dynamo.Sweeper{Store: dynamo.New(db, "sweep")}
	if n, err := w.Run(ctx); err != nil || n != 0 {
		t.Fatalf("Run with nothing pending = %d, %v", n, err)
	}
}
