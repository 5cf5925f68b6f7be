// Package sdkhttp is the HTTP client of the platform's AWS SDK clients.
//
// The SDK (smithy-go 1.28) closes a request's body as soon as the answer's
// headers are in, while net/http's connection writer may still be reading
// that body once more, to check it holds no more than its length. The
// SDK's body answers that read, through WriteTo, with the error io.EOF
// (not the end of stream): net/http then takes it for a failed request
// body and closes the connection under the answer being read. The call
// fails with "deserialization failed ... use of closed network connection"
// on a 200 (aws/aws-sdk-go-v2 issues 1825 and 2737). On loopback it
// happened about once in 2000 GetItems of 100 KB.
//
// Shield hides the body's WriteTo, so net/http reads it with Read, whose
// io.EOF after the close is the end of stream it expects.
package sdkhttp

import (
	"io"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
)

// Client returns the SDK's default HTTP client, shielded.
func Client() aws.HTTPClient { return Shield(awshttp.NewBuildableClient()) }

// Shield returns c with every request body shielded (see the package
// documentation). Set it as an aws.Config's or a service's HTTPClient.
func Shield(c aws.HTTPClient) aws.HTTPClient { return shield{c} }

type shield struct{ c aws.HTTPClient }

func (s shield) Do(r *http.Request) (*http.Response, error) {
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = readCloser{r.Body}
	}
	return s.c.Do(r)
}

// readCloser has only Read and Close of the body it wraps.
type readCloser struct{ io.ReadCloser }
