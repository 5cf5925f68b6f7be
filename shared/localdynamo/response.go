package localdynamo

import (
	"encoding/json"
	"fmt"
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

// dynErr is an error answered in DynamoDB's error shape.
type dynErr struct {
	status int
	typ    string
	msg    string
	extra  map[string]any // more fields of the body (Item, CancellationReasons)
}

func (e *dynErr) Error() string { return e.typ + ": " + e.msg }

func (e *dynErr) response() response {
	body := map[string]any{"__type": errTypePrefix + e.typ, "message": e.msg}
	for k, v := range e.extra {
		body[k] = v
	}
	b, _ := json.Marshal(body)
	status := e.status
	if status == 0 {
		status = http.StatusBadRequest
	}
	return response{status: status, body: b}
}

// invalid is a ValidationException.
func invalid(format string, args ...any) error {
	return &dynErr{typ: "ValidationException", msg: fmt.Sprintf(format, args...)}
}

// asInvalid turns a plain error into a ValidationException, keeping a
// *dynErr as it is.
func asInvalid(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := err.(*dynErr); ok {
		return err
	}
	return &dynErr{typ: "ValidationException", msg: err.Error()}
}

func notFound() error {
	return &dynErr{typ: "ResourceNotFoundException", msg: "Requested resource not found"}
}

// toResponse answers v (or err) as DynamoDB does.
func toResponse(v any, err error) response {
	if err != nil {
		if de, ok := err.(*dynErr); ok {
			return de.response()
		}
		return errorResponse(http.StatusInternalServerError, "InternalServerError", err.Error())
	}
	if raw, ok := v.(json.RawMessage); ok {
		return response{status: http.StatusOK, body: raw}
	}
	return jsonResponse(v)
}
