// Package runtime builds the platform's handlers and AWS clients from the
// environment: the same wiring serves the Lambda functions and the local
// platform.
package runtime

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/httpapi"
)

// Env is the platform's configuration, read from environment variables
// (documented in README.md).
type Env struct {
	Table          string // PLATFORM_TABLE: the DynamoDB table (default "platform")
	Bucket         string // PLATFORM_BUCKET: the S3 bucket of file contents (default "platform-files")
	DynamoEndpoint string // DYNAMODB_ENDPOINT: a DynamoDB endpoint other than AWS's (e.g. DynamoDB Local)
	S3Endpoint     string // S3_ENDPOINT: an S3 endpoint other than AWS's (e.g. MinIO)
	PagingKey      string // PLATFORM_PAGING_KEY: hex secret signing nextTokens, shared by every function
}

// FromEnv reads Env from the process environment.
func FromEnv() Env {
	get := func(k, def string) string {
		if v := os.Getenv(k); v != "" {
			return v
		}
		return def
	}
	return Env{
		Table:          get("PLATFORM_TABLE", "platform"),
		Bucket:         get("PLATFORM_BUCKET", "platform-files"),
		DynamoEndpoint: os.Getenv("DYNAMODB_ENDPOINT"),
		S3Endpoint:     os.Getenv("S3_ENDPOINT"),
		PagingKey:      os.Getenv("PLATFORM_PAGING_KEY"),
	}
}

// PagingKeyBytes decodes the paging key; it must be at least 16 bytes.
func (e Env) PagingKeyBytes() ([]byte, error) {
	k, err := hex.DecodeString(e.PagingKey)
	if err != nil || len(k) < 16 {
		return nil, errors.New("PLATFORM_PAGING_KEY must be set to at least 32 hex digits (e.g. openssl rand -hex 32)")
	}
	return k, nil
}

// AWSConfig loads the AWS configuration (region, credentials) of the environment.
func AWSConfig(ctx context.Context) (aws.Config, error) {
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return cfg, err
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	return cfg, nil
}

// DynamoClient returns a DynamoDB client counting its usage (dynamo.CountUsage).
// With handler set, requests go to that in-process DynamoDB (the local
// platform's stand-in) without a network hop.
func DynamoClient(cfg aws.Config, env Env, handler http.Handler) *dynamodb.Client {
	return dynamodb.NewFromConfig(cfg, dynamo.CountUsage, func(o *dynamodb.Options) {
		switch {
		case handler != nil:
			o.BaseEndpoint = aws.String("http://dynamodb.local")
			o.HTTPClient = &http.Client{Transport: InProcess(handler)}
			o.Credentials = credentials.NewStaticCredentialsProvider("local", "local", "")
			o.Region = "us-east-1"
		case env.DynamoEndpoint != "":
			o.BaseEndpoint = aws.String(env.DynamoEndpoint)
		}
	})
}

// InProcess is an http.RoundTripper that serves requests with handler.
func InProcess(handler http.Handler) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		if err := r.Context().Err(); err != nil {
			return nil, err
		}
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, r)
		return rec.Result(), nil
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// AreaHandler builds the HTTP handler of one API area from the environment,
// for a Lambda function.
func AreaHandler(ctx context.Context, area httpapi.Area) (http.Handler, error) {
	env := FromEnv()
	key, err := env.PagingKeyBytes()
	if err != nil {
		return nil, err
	}
	cfg, err := AWSConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("aws config: %w", err)
	}
	store := dynamo.New(DynamoClient(cfg, env, nil), env.Table)
	return httpapi.New(httpapi.Config{Store: store, PagingKey: key}, area), nil
}

// StartLambda serves one API area as a Lambda function behind API Gateway
// (HTTP API, payload format 2.0). It never returns.
func StartLambda(area httpapi.Area) {
	h, err := AreaHandler(context.Background(), area)
	if err != nil {
		log.Fatal(err)
	}
	lambda.Start(httpadapter.NewV2(h).ProxyWithContext)
}
