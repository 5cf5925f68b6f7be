// Package s3store is the platform's file storage (platform.FileStorage) on
// S3 through the AWS SDK: presigned PUTs from the SDK's presign client,
// streamed reads, server-side copies. The same code serves AWS and the local
// platform's embedded S3 (shared/locals3).
package s3store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/botforge/platform/shared/platform"
)

// Options configure a Store.
type Options struct {
	// PresignEndpoint, when set, returns the S3 endpoint a presigned URL
	// made during ctx must point at. The local platform serves its S3 under
	// /_s3 on the API's own port and signs URLs for the address the caller
	// used; in AWS it is nil and URLs point at the client's endpoint.
	PresignEndpoint func(ctx context.Context) string
}

// Store keeps file contents in one bucket.
type Store struct {
	client  *s3.Client
	presign *s3.PresignClient
	bucket  string
	opts    Options
}

var _ platform.FileStorage = (*Store)(nil)

// New returns a Store over bucket. Build client from config.LoadDefaultConfig
// (its zero-value aws.Config disables the SDK's default checksums).
func New(client *s3.Client, bucket string, opts Options) *Store {
	return &Store{client: client, presign: s3.NewPresignClient(client), bucket: bucket, opts: opts}
}

// PresignPut signs a PUT of key with its content type and length: S3 (and
// the embedded S3) refuse the URL for any other key, content type or length
// and after ttl. No checksum algorithm is set: a browser or the official
// client could not send the matching header.
func (s *Store) PresignPut(ctx context.Context, key, contentType string, size int64, ttl time.Duration) (string, error) {
	opts := []func(*s3.PresignOptions){s3.WithPresignExpires(ttl)}
	if s.opts.PresignEndpoint != nil {
		if ep := s.opts.PresignEndpoint(ctx); ep != "" {
			opts = append(opts, s3.WithPresignClientFromClientOptions(func(o *s3.Options) {
				o.BaseEndpoint = aws.String(ep)
			}))
		}
	}
	in := &s3.PutObjectInput{
		Bucket:        &s.bucket,
		Key:           &key,
		ContentType:   &contentType,
		ContentLength: &size,
	}
	if t := platform.UploadTaggingFrom(ctx); t != "" {
		in.Tagging = aws.String(t) // the uploader must send exactly this x-amz-tagging
	}
	req, err := s.presign.PresignPutObject(ctx, in, opts...)
	if err != nil {
		return "", fmt.Errorf("presign PUT %s: %w", key, err)
	}
	return req.URL, nil
}

// EnsureBucket creates the bucket when it is missing (the local platform
// over an external S3 such as MinIO or moto; in AWS the stack creates it).
// region is the bucket's region ("" or us-east-1: no location constraint).
func (s *Store) EnsureBucket(ctx context.Context, region string) error {
	_, err := s.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &s.bucket})
	if err == nil {
		return nil
	}
	var nf *types.NotFound
	var nb *types.NoSuchBucket
	var re *smithyhttp.ResponseError
	if !errors.As(err, &nf) && !errors.As(err, &nb) && !(errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotFound) {
		return fmt.Errorf("s3 head bucket %s: %w", s.bucket, err)
	}
	in := &s3.CreateBucketInput{Bucket: &s.bucket}
	if region != "" && region != "us-east-1" {
		in.CreateBucketConfiguration = &types.CreateBucketConfiguration{LocationConstraint: types.BucketLocationConstraint(region)}
	}
	_, err = s.client.CreateBucket(ctx, in)
	var owned *types.BucketAlreadyOwnedByYou
	if err != nil && !errors.As(err, &owned) {
		return fmt.Errorf("s3 create bucket %s: %w", s.bucket, err)
	}
	return nil
}

// Open streams an object. S3 enforces If-Match; the ETag of the answer is
// checked as well, for stores that ignore it.
func (s *Store) Open(ctx context.Context, key, etag string) (io.ReadCloser, platform.ObjectInfo, error) {
	in := &s3.GetObjectInput{Bucket: &s.bucket, Key: &key}
	if etag != "" {
		in.IfMatch = &etag
	}
	// The caller verifies what it reads (SHA-256) where it matters; the
	// SDK's optional response checksum would only log its absence.
	out, err := s.client.GetObject(ctx, in, func(o *s3.Options) {
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
	if err != nil {
		return nil, platform.ObjectInfo{}, mapErr("get", key, err)
	}
	info := platform.ObjectInfo{Size: aws.ToInt64(out.ContentLength), ContentType: aws.ToString(out.ContentType), ETag: aws.ToString(out.ETag)}
	if etag != "" && info.ETag != etag {
		out.Body.Close()
		return nil, platform.ObjectInfo{}, platform.ErrObjectChanged
	}
	return out.Body, info, nil
}

// Head describes an object.
func (s *Store) Head(ctx context.Context, key string) (platform.ObjectInfo, error) {
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: &key})
	if err != nil {
		return platform.ObjectInfo{}, mapErr("head", key, err)
	}
	return platform.ObjectInfo{Size: aws.ToInt64(out.ContentLength), ContentType: aws.ToString(out.ContentType), ETag: aws.ToString(out.ETag)}, nil
}

// Copy copies src (still at version etag, when set) to dst inside the
// bucket, keeping its content type.
func (s *Store) Copy(ctx context.Context, src, etag, dst string) error {
	source := (&url.URL{Path: s.bucket + "/" + src}).EscapedPath()
	in := &s3.CopyObjectInput{Bucket: &s.bucket, Key: &dst, CopySource: &source}
	if etag != "" {
		in.CopySourceIfMatch = &etag
	}
	_, err := s.client.CopyObject(ctx, in)
	return mapErr("copy", src, err)
}

// Put stores an object. The body is seekable: over plain HTTP (the local
// platform) the SDK computes its default checksum by reading it first.
func (s *Store) Put(ctx context.Context, key, contentType string, body io.ReadSeeker, size int64) error {
	_, err := s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: &s.bucket, Key: &key, ContentType: &contentType, ContentLength: &size, Body: body,
	})
	return mapErr("put", key, err)
}

// Delete removes an object (S3 answers a delete of a missing key with success).
func (s *Store) Delete(ctx context.Context, key string) error {
	_, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: &key})
	return mapErr("delete", key, err)
}

func mapErr(op, key string, err error) error {
	if err == nil {
		return nil
	}
	var nsk *types.NoSuchKey
	var nf *types.NotFound
	if errors.As(err, &nsk) || errors.As(err, &nf) {
		return platform.ErrNoObject
	}
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		switch re.HTTPStatusCode() {
		case http.StatusNotFound:
			return platform.ErrNoObject
		case http.StatusPreconditionFailed:
			return platform.ErrObjectChanged
		}
	}
	return fmt.Errorf("s3 %s %s: %w", op, key, err)
}
