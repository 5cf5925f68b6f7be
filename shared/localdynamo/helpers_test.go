package localdynamo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/sdkhttp"
)

// newClient returns an SDK client for the endpoint at url. It does not retry,
// so that tests see every error.
func newClient(url string, opts ...func(*dynamodb.Options)) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("local", "local", ""),
		BaseEndpoint: aws.String(url),
		Retryer:      aws.NopRetryer{},
		HTTPClient: sdkhttp.Shield(&http.Client{
			Timeout:   30 * time.Second,
			Transport: &http.Transport{MaxIdleConnsPerHost: 256},
		}),
	}, opts...)
}

// clientFor returns newClient(url) for srv's clients: its item operations
// run in-process on srv (inprocess.go), as the platform's do, unless
// PLATFORM_LOCAL_DYNAMO_HTTP is set (then every call goes over HTTP).
func clientFor(srv *Server, url string) *dynamodb.Client {
	if os.Getenv("PLATFORM_LOCAL_DYNAMO_HTTP") != "" {
		return newClient(url)
	}
	return newClient(url, func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, srv.InProcess) })
}

// env is a Server in a directory, served over loopback.
type env struct {
	t   testing.TB
	dir string
	srv *Server
	hs  *httptest.Server
	db  *dynamodb.Client
}

func openEnv(t testing.TB, dir string) *env {
	t.Helper()
	srv, err := Open(dir)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	hs := httptest.NewServer(srv)
	e := &env{t: t, dir: dir, srv: srv, hs: hs, db: clientFor(srv, hs.URL)}
	t.Cleanup(e.close)
	return e
}

// close stops serving and closes the Server; it may be called twice.
func (e *env) close() {
	e.t.Helper()
	e.hs.Close()
	if err := e.srv.Close(); err != nil {
		e.t.Errorf("Close: %v", err)
	}
}

// reopen closes the Server and opens the directory again.
func (e *env) reopen() *env {
	e.t.Helper()
	e.close()
	return openEnv(e.t, e.dir)
}

func ctx() context.Context { return context.Background() }

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func n(v int) types.AttributeValue    { return &types.AttributeValueMemberN{Value: strconv.Itoa(v)} }
func keyOf(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": s(pk), "sk": s(sk)}
}

// createTable creates table with pk/sk string keys and GSI "gsi1" on
// gpk/gsk, like the platform's table.
func createTable(t testing.TB, db *dynamodb.Client, table string) {
	t.Helper()
	str := types.ScalarAttributeTypeS
	_, err := db.CreateTable(ctx(), &dynamodb.CreateTableInput{
		TableName:   aws.String(table),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("pk"), AttributeType: str},
			{AttributeName: aws.String("sk"), AttributeType: str},
			{AttributeName: aws.String("gpk"), AttributeType: str},
			{AttributeName: aws.String("gsk"), AttributeType: str},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange},
		},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
			IndexName: aws.String("gsi1"),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String("gpk"), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String("gsk"), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll},
		}},
	})
	if err != nil {
		t.Fatalf("CreateTable: %v", err)
	}
}

// scanAll returns every item of table as canonical JSON, sorted.
func scanAll(t testing.TB, db *dynamodb.Client, table string) []string {
	t.Helper()
	var out []string
	p := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{TableName: aws.String(table), Limit: aws.Int32(7)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx())
		if err != nil {
			t.Fatalf("Scan %s: %v", table, err)
		}
		for _, it := range page.Items {
			out = append(out, canonical(t, it))
		}
	}
	sort.Strings(out)
	return out
}

// canonical renders an item as JSON with sorted keys and sorted set members
// (minidyn, like DynamoDB, does not keep the order of set members).
func canonical(t testing.TB, it map[string]types.AttributeValue) string {
	t.Helper()
	b, err := json.Marshal(canonicalValue(&types.AttributeValueMemberM{Value: it}))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func canonicalValue(v types.AttributeValue) any {
	sorted := func(in []string) []string {
		out := slices.Clone(in)
		slices.Sort(out)
		return out
	}
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return map[string]any{"S": v.Value}
	case *types.AttributeValueMemberN:
		return map[string]any{"N": v.Value}
	case *types.AttributeValueMemberB:
		return map[string]any{"B": v.Value}
	case *types.AttributeValueMemberBOOL:
		return map[string]any{"BOOL": v.Value}
	case *types.AttributeValueMemberNULL:
		return map[string]any{"NULL": v.Value}
	case *types.AttributeValueMemberSS:
		return map[string]any{"SS": sorted(v.Value)}
	case *types.AttributeValueMemberNS:
		return map[string]any{"NS": sorted(v.Value)}
	case *types.AttributeValueMemberBS:
		bs := slices.Clone(v.Value)
		slices.SortFunc(bs, bytes.Compare)
		return map[string]any{"BS": bs}
	case *types.AttributeValueMemberL:
		l := make([]any, len(v.Value))
		for i, e := range v.Value {
			l[i] = canonicalValue(e)
		}
		return map[string]any{"L": l}
	case *types.AttributeValueMemberM:
		m := make(map[string]any, len(v.Value))
		for k, e := range v.Value {
			m[k] = canonicalValue(e)
		}
		return map[string]any{"M": m}
	}
	return fmt.Sprintf("unknown %T", v)
}

// queryGSI returns pk/sk of every item under gpk in gsi1, in index order,
// reading pages of two items.
func queryGSI(t testing.TB, db *dynamodb.Client, table, gpk string) []string {
	t.Helper()
	var out []string
	p := dynamodb.NewQueryPaginator(db, &dynamodb.QueryInput{
		TableName:                 aws.String(table),
		IndexName:                 aws.String("gsi1"),
		KeyConditionExpression:    aws.String("gpk = :g"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":g": s(gpk)},
		Limit:                     aws.Int32(2),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx())
		if err != nil {
			t.Fatalf("Query gsi1: %v", err)
		}
		for _, it := range page.Items {
			out = append(out, it["pk"].(*types.AttributeValueMemberS).Value+"/"+it["sk"].(*types.AttributeValueMemberS).Value)
		}
	}
	return out
}

func getItem(t testing.TB, db *dynamodb.Client, table, pk, sk string) map[string]types.AttributeValue {
	t.Helper()
	out, err := db.GetItem(ctx(), &dynamodb.GetItemInput{TableName: aws.String(table), Key: keyOf(pk, sk), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatalf("GetItem %s/%s: %v", pk, sk, err)
	}
	return out.Item
}

func isErr[T error](err error) bool {
	var target T
	return errors.As(err, &target)
}

func fileSize(t testing.TB, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}
