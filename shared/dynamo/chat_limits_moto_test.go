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
	"github.com/botforge/platform/shared/platform"
)

// TestSharedLimitHoldOnMoto runs the held slots' expressions (the take's
// transaction, the releases, a refused take's reads and its purge of a
// dead holder, the heartbeat) on moto_server, which parses and checks
// them as DynamoDB does, not on the embedded DynamoDB they were written
// with.
func TestSharedLimitHoldOnMoto(t *testing.T) {
	ctx := context.Background()
	store := motoStore(t, "limits")
	clk := &clock{t: time.Now()}
	a, b := store.NewLimiter(), store.NewLimiter()
	a.Now, b.Now = clk.Now, clk.Now
	key := platform.Scope{Key: "moto/key", Max: 2, Refusal: "per key"}
	inst := platform.Scope{Key: "moto/inst", Max: 100, Refusal: "per installation"}
	held := func(s platform.Scope, want int64) {
		t.Helper()
		if n, err := b.Held(ctx, s.Key); err != nil || n != want {
			t.Fatalf("%s held %d (%v), want %d", s.Key, n, err, want)
		}
	}
	if _, err := a.Hold(ctx, key, inst); err != nil {
		t.Fatal(err)
	}
	a2, err := a.Hold(ctx, key, inst)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Hold(ctx, key, inst)
	refusedWith(t, err, "per key")
	a2()
	b1, err := b.Hold(ctx, key, inst)
	if err != nil {
		t.Fatal(err)
	}
	held(key, 2)
	// a dies holding one slot; b writes its heartbeat each minute.
	for i := 0; i < 3; i++ {
		clk.Add(time.Minute + time.Second)
		if err := b.Renew(ctx); err != nil {
			t.Fatal(err)
		}
	}
	b2, err := b.Hold(ctx, key, inst)
	if err != nil {
		t.Fatalf("the dead holder's slot is not reclaimed: %v", err)
	}
	held(key, 2)
	held(inst, 2)
	b1()
	b2()
	held(key, 0)
	held(inst, 0)
}

// motoStore is a store over a fresh table on a moto_server of the test's
// own, which parses and checks expressions as DynamoDB does.
func motoStore(t *testing.T, table string) *dynamo.Store {
	t.Helper()
	db := dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String(mototest.Start(t)),
		Credentials: credentials.NewStaticCredentialsProvider("local", "local", ""), HTTPClient: &http.Client{Timeout: 30 * time.Second}})
	if err := dynamo.EnsureTable(context.Background(), db, table); err != nil {
		t.Fatal(err)
	}
	return dynamo.New(db, table)
}
