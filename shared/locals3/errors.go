package locals3

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"strconv"
)

// S3 error codes produced by this package (the storage layer produces its own
// codes, e.g. NoSuchKey, through gofakes3).
const (
	codeAccessDenied          = "AccessDenied"
	codeSignatureDoesNotMatch = "SignatureDoesNotMatch"
	codeInvalidAccessKeyID    = "InvalidAccessKeyId"
	codeAuthHeaderMalformed   = "AuthorizationHeaderMalformed"
	codeAuthQueryParamsError  = "AuthorizationQueryParametersError"
	codeRequestTimeTooSkewed  = "RequestTimeTooSkewed"
	codeInvalidRequest        = "InvalidRequest"
	codeInvalidArgument       = "InvalidArgument"
	codeContentSHA256Mismatch = "XAmzContentSHA256Mismatch"
	codeBadDigest             = "BadDigest"
	codeInvalidDigest         = "InvalidDigest"
	codeEntityTooLarge        = "EntityTooLarge"
	codeIncompleteBody        = "IncompleteBody"
	codeMissingContentLength  = "MissingContentLength"
	codeNotImplemented        = "NotImplemented"
	codeInternalError         = "InternalError"
	codeInvalidChunkSizeError = "InvalidChunkSizeError"
	codeMalformedTrailerError = "MalformedTrailerError"
)

// s3Error is an error that is rendered as an S3 XML error document.
type s3Error struct {
	status  int
	code    string
	message string

	// Debugging aids S3 itself includes in SignatureDoesNotMatch responses.
	// They only contain data the client already knows.
	accessKeyID       string
	stringToSign      string
	canonicalRequest  string
	signatureProvided string
}

func (e *s3Error) Error() string { return e.code + ": " + e.message }

func newError(status int, code, format string, args ...any) *s3Error {
	return &s3Error{status: status, code: code, message: fmt.Sprintf(format, args...)}
}

func accessDenied(format string, args ...any) *s3Error {
	return newError(http.StatusForbidden, codeAccessDenied, format, args...)
}

// errorDocument is the XML body of an S3 error response.
type errorDocument struct {
	XMLName           xml.Name `xml:"Error"`
	Code              string   `xml:"Code"`
	Message           string   `xml:"Message"`
	Resource          string   `xml:"Resource,omitempty"`
	AWSAccessKeyID    string   `xml:"AWSAccessKeyId,omitempty"`
	StringToSign      string   `xml:"StringToSign,omitempty"`
	CanonicalRequest  string   `xml:"CanonicalRequest,omitempty"`
	SignatureProvided string   `xml:"SignatureProvided,omitempty"`
}

// writeError renders e as an S3 error response. HEAD responses carry no body,
// as with S3.
func writeError(w http.ResponseWriter, r *http.Request, e *s3Error) {
	body, err := xml.Marshal(errorDocument{
		Code:              e.code,
		Message:           e.message,
		Resource:          r.URL.Path,
		AWSAccessKeyID:    e.accessKeyID,
		StringToSign:      e.stringToSign,
		CanonicalRequest:  e.canonicalRequest,
		SignatureProvided: e.signatureProvided,
	})
	if err != nil { // cannot happen: the document only holds strings
		body = nil
	}
	body = append([]byte(xml.Header), body...)

	h := w.Header()
	h.Set("Content-Type", "application/xml")
	// Let browsers that PUT to presigned URLs from another origin read the
	// error instead of reporting an opaque CORS failure (gofakes3 does the
	// same for its own responses).
	h.Set("Access-Control-Allow-Origin", "*")
	if r.Method == http.MethodHead {
		w.WriteHeader(e.status)
		return
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(e.status)
	_, _ = w.Write(body)
}
