package s3store_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/botforge/platform/shared/platform"
	"github.com/botforge/platform/shared/s3store"
)

// TestUploadOrigin: the origin a browser uploads to is the one the
// presigned URLs name: on AWS (the SDK's default endpoint, as the Lambda
// functions and the stream tasks use it) the bucket's virtual-hosted S3
// host, with an S3_ENDPOINT (aws-local, MinIO) that endpoint.
func TestUploadOrigin(t *testing.T) {
	creds := credentials.NewStaticCredentialsProvider("AKIAEXAMPLE", "secret", "")
	for _, tc := range []struct{ region, endpoint, want string }{
		{"us-east-1", "", "https://platform-files-abc.s3.us-east-1.amazonaws.com"},
		{"eu-west-3", "", "https://platform-files-abc.s3.eu-west-3.amazonaws.com"},
		{"us-east-1", "http://127.0.0.1:40123", "http://127.0.0.1:40123"},
	} {
		c := s3.NewFromConfig(aws.Config{Region: tc.region, Credentials: creds}, func(o *s3.Options) {
			if tc.endpoint != "" {
				o.BaseEndpoint, o.UsePathStyle = aws.String(tc.endpoint), true
			}
		})
		if got := platform.UploadOrigin(context.Background(), s3store.New(c, "platform-files-abc", s3store.Options{})); got != tc.want {
			t.Errorf("%s %q: %q, want %q", tc.region, tc.endpoint, got, tc.want)
		}
	}
}
