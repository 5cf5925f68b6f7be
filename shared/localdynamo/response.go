package localdynamo

import (
	"bytes"
	"encoding/json"
	"hash/crc32"
	"net/http"
	"strconv"
	"strings"
)

const (
	contentType = "application/x-amz-json-1.0"
	// errTypePrefix is how DynamoDB qualifies the __type of its errors.
	errTypePrefix = "com.amazonaws.dynamodb.v20120810#"
)

// response is a complete answer to one request, built before anything is
// sent to the client so that it can be held back until the journal is synced.
type response struct {
	status int
	body   []byte
}

func (r response) ok() bool { return r.status == http.StatusOK }

func (r response) write(w http.ResponseWriter) {
	w.Header().Set("Content-Type", contentType)
	// Like DynamoDB, give the body's CRC32: the SDK checks every response
	// against it (and complains when it is missing).
	w.Header().Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE(r.body)), 10))
	w.WriteHeader(r.status)
	_, _ = w.Write(r.body)
}

// errorType returns the unqualified __type of an error response
// ("ConditionalCheckFailedException"), or "" if there is none.
func (r response) errorType() string {
	var e struct {
		Type string `json:"__type"`
	}
	if json.Unmarshal(r.body, &e) != nil {
		return ""
	}
	t := e.Type
	if i := strings.LastIndexByte(t, '#'); i >= 0 {
		t = t[i+1:]
	}
	return t
}

// errorResponse builds an error in DynamoDB's JSON error shape.
func errorResponse(status int, typ, msg string) response {
	b, _ := json.Marshal(struct {
		Type    string `json:"__type"`
		Message string `json:"message"`
	}{errTypePrefix + typ, msg})
	return response{status: status, body: b}
}

func validationError(msg string) response {
	return errorResponse(http.StatusBadRequest, "ValidationException", msg)
}

func resourceNotFound(msg string) response {
	return errorResponse(http.StatusBadRequest, "ResourceNotFoundException", msg)
}

// jsonResponse answers 200 with v encoded as JSON.
func jsonResponse(v any) response {
	b, err := json.Marshal(v)
	if err != nil {
		return errorResponse(http.StatusInternalServerError, "InternalServerError", err.Error())
	}
	return response{status: http.StatusOK, body: b}
}

// recorder is the http.ResponseWriter handed to minidyn.
type recorder struct {
	header http.Header
	status int
	buf    bytes.Buffer
}

func (r *recorder) Header() http.Header {
	if r.header == nil {
		r.header = http.Header{}
	}
	return r.header
}

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.buf.Write(p)
}

func (r *recorder) response() response {
	status := r.status
	if status == 0 {
		status = http.StatusOK
	}
	body := r.buf.Bytes()
	if status != http.StatusOK && !json.Valid(body) {
		// minidyn answers some errors with http.Error's plain text.
		return errorResponse(status, "ValidationException", strings.TrimSpace(string(body)))
	}
	return response{status: status, body: body}
}
