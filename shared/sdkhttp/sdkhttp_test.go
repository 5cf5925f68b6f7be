package sdkhttp_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/botforge/platform/shared/sdkhttp"
)

// sdkBody is a request body as smithy-go builds one: once closed, Read and
// WriteTo answer io.EOF. net/http calls WriteTo only after the content is
// sent, to check that nothing follows it; here that call waits for the
// Close, which is the order in which the SDK's race is lost.
type sdkBody struct {
	r      *bytes.Reader
	closed chan struct{}
	once   sync.Once
}

func newSDKBody(s string) *sdkBody {
	return &sdkBody{r: bytes.NewReader([]byte(s)), closed: make(chan struct{})}
}

func (b *sdkBody) Read(p []byte) (int, error) {
	select {
	case <-b.closed:
		return 0, io.EOF
	default:
		return b.r.Read(p)
	}
}

func (b *sdkBody) WriteTo(w io.Writer) (int64, error) {
	select {
	case <-b.closed:
		return 0, io.EOF
	case <-time.After(10 * time.Second):
		return b.r.WriteTo(w)
	}
}

func (b *sdkBody) Close() error {
	b.once.Do(func() { close(b.closed) })
	return nil
}

// TestClosedBodyKeepsTheAnswer: the body is closed as soon as the answer's
// headers are in (as the SDK does); the answer's body, sent after that,
// must still arrive whole.
func TestClosedBodyKeepsTheAnswer(t *testing.T) {
	answer := strings.Repeat("a", 256<<10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			return
		}
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		// Send the body once the client has had the time to close the
		// request body, unless it closed the connection.
		select {
		case <-r.Context().Done():
			return
		case <-time.After(500 * time.Millisecond):
		}
		_, _ = io.WriteString(w, answer)
	}))
	defer srv.Close()

	for name, c := range map[string]aws.HTTPClient{
		"shielded":   sdkhttp.Shield(srv.Client()),
		"sdkDefault": sdkhttp.Client(),
	} {
		t.Run(name, func(t *testing.T) {
			for i := range 3 {
				body := newSDKBody(`{"TableName":"main"}`)
				req, _ := http.NewRequest(http.MethodPost, srv.URL, body)
				req.ContentLength = int64(body.r.Len())
				res, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body.Close()
				got, err := io.ReadAll(res.Body)
				res.Body.Close()
				if err != nil || len(got) != len(answer) {
					t.Fatalf("call %d: read %d of %d bytes of the answer: %v", i, len(got), len(answer), err)
				}
			}
		})
	}
}

// TestUnshieldedClientLosesTheAnswer shows the defect Shield avoids, so
// that this package can go once net/http or smithy-go no longer has it.
func TestUnshieldedClientLosesTheAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(500 * time.Millisecond):
			_, _ = io.WriteString(w, "answer")
		}
	}))
	defer srv.Close()
	body := newSDKBody(`{}`)
	req, _ := http.NewRequest(http.MethodPost, srv.URL, body)
	req.ContentLength = 2
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body.Close()
	defer res.Body.Close()
	if got, err := io.ReadAll(res.Body); err == nil {
		t.Logf("net/http no longer closes the connection on the body's io.EOF (read %q): sdkhttp.Shield may go", got)
	} else {
		t.Logf("unshielded, as expected: %v", err)
	}
}
