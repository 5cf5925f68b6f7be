package s3store

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

// EventHandler adapts fn, called with the key of each object created in
// bucket, to a Lambda handler of S3 ObjectCreated notifications. Keys in S3
// events are URL-encoded (form encoding); records of other buckets or event
// kinds are skipped. An error makes Lambda retry the event: fn must be
// idempotent.
func EventHandler(bucket string, fn func(ctx context.Context, key string) error) func(context.Context, events.S3Event) error {
	return func(ctx context.Context, ev events.S3Event) error {
		var errs []error
		for _, r := range ev.Records {
			if r.S3.Bucket.Name != bucket || !strings.Contains(r.EventName, "ObjectCreated") {
				continue
			}
			key, err := url.QueryUnescape(r.S3.Object.Key)
			if err != nil {
				errs = append(errs, fmt.Errorf("object key %q: %w", r.S3.Object.Key, err))
				continue
			}
			if err := fn(ctx, key); err != nil {
				errs = append(errs, fmt.Errorf("object %s: %w", key, err))
			}
		}
		return errors.Join(errs...)
	}
}
