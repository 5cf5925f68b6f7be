package locals3

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// AWS Signature Version 4 verification, as described in
// https://docs.aws.amazon.com/AmazonS3/latest/API/sig-v4-authenticating-requests.html
// The canonicalisation mirrors github.com/aws/aws-sdk-go-v2/aws/signer/v4 with
// the S3 settings (no double path escaping).

const (
	signingAlgorithm = "AWS4-HMAC-SHA256"
	amzDateFormat    = "20060102T150405Z"
	scopeDateFormat  = "20060102"
	scopeTerminator  = "aws4_request"
	serviceName      = "s3"

	// maxPresignExpires is the longest validity S3 accepts for a presigned
	// URL: seven days.
	maxPresignExpires = 7 * 24 * 60 * 60
	// maxClockSkew is how far a signature's timestamp may be from the
	// server's clock (S3 uses 15 minutes).
	maxClockSkew = 15 * time.Minute

	payloadUnsigned                 = "UNSIGNED-PAYLOAD"
	payloadStreamingSigned          = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
	payloadStreamingSignedTrailer   = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
	payloadStreamingUnsignedTrailer = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"

	headerContentSHA256 = "X-Amz-Content-Sha256"
	headerAmzDate       = "X-Amz-Date"
)

// Query parameters of a presigned URL.
const (
	queryAlgorithm     = "X-Amz-Algorithm"
	queryCredential    = "X-Amz-Credential"
	queryDate          = "X-Amz-Date"
	queryExpires       = "X-Amz-Expires"
	querySignedHeaders = "X-Amz-SignedHeaders"
	querySignature     = "X-Amz-Signature"
	queryContentSHA256 = "X-Amz-Content-Sha256"
)

// authInfo describes a request whose signature has been verified. The
// fields are what the body reader needs to verify aws-chunked payload
// signatures, which are chained to the request's (seed) signature.
type authInfo struct {
	presigned   bool
	payloadHash string // the payload hash that was signed
	amzDate     string // the request's timestamp in amzDateFormat
	scope       string // credential scope: date/region/s3/aws4_request
	signingKey  []byte
	signature   string // the verified request signature (lowercase hex)
}

// queryParam is one decoded name/value pair of a query string, in order.
type queryParam struct{ name, value string }

// authenticate verifies the request's SigV4 signature, either from the
// Authorization header or from presigned-URL query parameters. canonicalURI is
// the canonical form of the path as the client addressed it (including any
// mount prefix).
func (s *Server) authenticate(r *http.Request, canonicalURI string) (*authInfo, *s3Error) {
	params, err := parseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, newError(http.StatusBadRequest, codeInvalidArgument, "The query string is malformed: %v", err)
	}
	authz := r.Header.Values("Authorization")
	presigned := hasParam(params, querySignature) || hasParam(params, queryAlgorithm) || hasParam(params, queryCredential)

	switch {
	case presigned && len(authz) > 0:
		return nil, newError(http.StatusBadRequest, codeInvalidArgument, "Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter or the Authorization header should be specified")
	case presigned:
		return s.verifyPresigned(r, canonicalURI, params)
	case len(authz) == 1 && strings.HasPrefix(authz[0], signingAlgorithm+" "):
		return s.verifyHeader(r, canonicalURI, params, authz[0])
	case len(authz) > 0:
		return nil, newError(http.StatusBadRequest, codeInvalidArgument, "Unsupported Authorization Type; only %s is supported", signingAlgorithm)
	default:
		return nil, accessDenied("Anonymous access is not allowed: sign the request with AWS Signature Version 4 or use a presigned URL")
	}
}

// verifyHeader verifies an "Authorization: AWS4-HMAC-SHA256 ..." request.
func (s *Server) verifyHeader(r *http.Request, canonicalURI string, params []queryParam, authz string) (*authInfo, *s3Error) {
	malformed := func(format string, args ...any) *s3Error {
		return newError(http.StatusBadRequest, codeAuthHeaderMalformed, "The authorization header is malformed; "+format, args...)
	}

	fields := map[string]string{}
	for _, part := range strings.Split(strings.TrimPrefix(authz, signingAlgorithm+" "), ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return nil, malformed("the component %q is not of the form name=value.", strings.TrimSpace(part))
		}
		if _, dup := fields[k]; dup {
			return nil, malformed("the component %q is repeated.", k)
		}
		fields[k] = v
	}
	credStr, signedStr, signature := fields["Credential"], fields["SignedHeaders"], fields["Signature"]
	if credStr == "" || signedStr == "" || signature == "" {
		return nil, malformed("it must contain Credential, SignedHeaders and Signature.")
	}

	amzDate := r.Header.Get(headerAmzDate)
	if amzDate == "" {
		return nil, accessDenied("AWS authentication requires a valid X-Amz-Date header")
	}
	t, err := time.Parse(amzDateFormat, amzDate)
	if err != nil {
		return nil, accessDenied("X-Amz-Date %q is not of the form %s", amzDate, amzDateFormat)
	}
	now := s.now()
	if d := now.Sub(t); d > maxClockSkew || d < -maxClockSkew {
		return nil, newError(http.StatusForbidden, codeRequestTimeTooSkewed,
			"The difference between the request time (%s) and the server time (%s) is too large.", t.Format(amzDateFormat), now.UTC().Format(amzDateFormat))
	}

	scope, e := s.checkCredential(credStr, amzDate, malformed)
	if e != nil {
		return nil, e
	}

	payloadHash := r.Header.Get(headerContentSHA256)
	if payloadHash == "" {
		return nil, newError(http.StatusBadRequest, codeInvalidRequest, "Missing required header for this request: x-amz-content-sha256")
	}
	if !validPayloadHash(payloadHash) {
		return nil, newError(http.StatusBadRequest, codeInvalidArgument,
			"x-amz-content-sha256 must be UNSIGNED-PAYLOAD, a STREAMING-* value or a valid hex SHA-256 digest, not %q", payloadHash)
	}

	signed, e := parseSignedHeaders(signedStr, malformed)
	if e != nil {
		return nil, e
	}
	if e := checkAllAmzHeadersSigned(r, signed); e != nil {
		return nil, e
	}

	canonicalRequest := strings.Join([]string{
		r.Method,
		canonicalURI,
		canonicalQuery(params, ""),
		canonicalHeaders(r, signed),
		signedStr,
		payloadHash,
	}, "\n")
	return s.checkSignature(canonicalRequest, amzDate, scope, signature, false, payloadHash)
}

// verifyPresigned verifies a presigned-URL request.
func (s *Server) verifyPresigned(r *http.Request, canonicalURI string, params []queryParam) (*authInfo, *s3Error) {
	malformed := func(format string, args ...any) *s3Error {
		return newError(http.StatusBadRequest, codeAuthQueryParamsError, "Error parsing the X-Amz-Credential parameter; "+format, args...)
	}
	get := func(name string) (string, *s3Error) {
		var v string
		n := 0
		for _, p := range params {
			if p.name == name {
				v = p.value
				n++
			}
		}
		switch {
		case n == 0 || v == "":
			return "", newError(http.StatusBadRequest, codeAuthQueryParamsError,
				"Query-string authentication version 4 requires the X-Amz-Algorithm, X-Amz-Credential, X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, and X-Amz-Expires parameters; %s is missing.", name)
		case n > 1:
			return "", newError(http.StatusBadRequest, codeAuthQueryParamsError, "The query parameter %s is repeated.", name)
		}
		return v, nil
	}

	values := map[string]string{}
	for _, name := range []string{queryAlgorithm, queryCredential, queryDate, queryExpires, querySignedHeaders, querySignature} {
		v, e := get(name)
		if e != nil {
			return nil, e
		}
		values[name] = v
	}
	if values[queryAlgorithm] != signingAlgorithm {
		return nil, newError(http.StatusBadRequest, codeAuthQueryParamsError, "X-Amz-Algorithm only supports %q", signingAlgorithm)
	}

	amzDate := values[queryDate]
	t, err := time.Parse(amzDateFormat, amzDate)
	if err != nil {
		return nil, newError(http.StatusBadRequest, codeAuthQueryParamsError, "X-Amz-Date must be in the ISO8601 Long Format \"yyyyMMdd'T'HHmmss'Z'\"")
	}
	expires, err := strconv.ParseInt(values[queryExpires], 10, 64)
	if err != nil || expires < 0 {
		return nil, newError(http.StatusBadRequest, codeAuthQueryParamsError, "X-Amz-Expires should be a number of seconds")
	}
	if expires > maxPresignExpires {
		return nil, newError(http.StatusBadRequest, codeAuthQueryParamsError, "X-Amz-Expires must be less than a week (in seconds) that is 604800")
	}
	now := s.now()
	if t.After(now.Add(maxClockSkew)) {
		return nil, accessDenied("Request is not valid yet")
	}
	if now.After(t.Add(time.Duration(expires) * time.Second)) {
		return nil, accessDenied("Request has expired")
	}

	scope, e := s.checkCredential(values[queryCredential], amzDate, malformed)
	if e != nil {
		return nil, e
	}
	signedStr := values[querySignedHeaders]
	signed, e := parseSignedHeaders(signedStr, func(format string, args ...any) *s3Error {
		return newError(http.StatusBadRequest, codeAuthQueryParamsError, "X-Amz-SignedHeaders is malformed; "+format, args...)
	})
	if e != nil {
		return nil, e
	}
	if e := checkAllAmzHeadersSigned(r, signed); e != nil {
		return nil, e
	}

	// A presigned URL signs no payload unless the signer put a payload hash
	// in the query (the AWS SDKs use UNSIGNED-PAYLOAD).
	payloadHash := payloadUnsigned
	for _, p := range params {
		if p.name == queryContentSHA256 {
			payloadHash = p.value
		}
	}
	if payloadHash != payloadUnsigned && !isHexSHA256(payloadHash) {
		return nil, newError(http.StatusBadRequest, codeAuthQueryParamsError, "X-Amz-Content-Sha256 must be UNSIGNED-PAYLOAD or a hex SHA-256 digest in a presigned URL")
	}

	canonicalRequest := strings.Join([]string{
		r.Method,
		canonicalURI,
		canonicalQuery(params, querySignature),
		canonicalHeaders(r, signed),
		signedStr,
		payloadHash,
	}, "\n")
	return s.checkSignature(canonicalRequest, amzDate, scope, values[querySignature], true, payloadHash)
}

// checkCredential validates "AKID/yyyymmdd/region/s3/aws4_request" against the
// configured credentials and the request date, and returns the scope (the
// part after the access key ID).
func (s *Server) checkCredential(cred, amzDate string, malformed func(string, ...any) *s3Error) (string, *s3Error) {
	parts := strings.Split(cred, "/")
	if len(parts) != 5 {
		return "", malformed("the Credential %q is not of the form <access key id>/<date>/<region>/<service>/aws4_request.", cred)
	}
	akid, date, region, service, term := parts[0], parts[1], parts[2], parts[3], parts[4]
	if subtleNotEqual(akid, s.opts.AccessKeyID) {
		e := newError(http.StatusForbidden, codeInvalidAccessKeyID, "The AWS Access Key Id you provided does not exist in our records.")
		e.accessKeyID = akid
		return "", e
	}
	if date != amzDate[:len(scopeDateFormat)] {
		return "", malformed("incorrect date %q: it must be the date of X-Amz-Date (%s).", date, amzDate[:len(scopeDateFormat)])
	}
	if region != s.opts.Region {
		return "", malformed("the region %q is wrong; expecting %q", region, s.opts.Region)
	}
	if service != serviceName {
		return "", malformed("incorrect service %q. This endpoint belongs to %q.", service, serviceName)
	}
	if term != scopeTerminator {
		return "", malformed("incorrect terminal %q. This endpoint uses %q.", term, scopeTerminator)
	}
	return strings.Join(parts[1:], "/"), nil
}

// checkSignature computes the signature of canonicalRequest and compares it
// in constant time with the one the client provided.
func (s *Server) checkSignature(canonicalRequest, amzDate, scope, provided string, presigned bool, payloadHash string) (*authInfo, *s3Error) {
	stringToSign := buildStringToSign(amzDate, scope, canonicalRequest)
	key := deriveSigningKey(s.opts.SecretAccessKey, scope)
	expected := hex.EncodeToString(hmacSHA256(key, stringToSign))
	if !hmac.Equal([]byte(expected), []byte(strings.ToLower(provided))) {
		e := newError(http.StatusForbidden, codeSignatureDoesNotMatch,
			"The request signature we calculated does not match the signature you provided. Check your key and signing method.")
		e.accessKeyID = s.opts.AccessKeyID
		e.stringToSign = stringToSign
		e.canonicalRequest = canonicalRequest
		e.signatureProvided = provided
		return nil, e
	}
	return &authInfo{
		presigned:   presigned,
		payloadHash: payloadHash,
		amzDate:     amzDate,
		scope:       scope,
		signingKey:  key,
		signature:   expected,
	}, nil
}

func buildStringToSign(amzDate, scope, canonicalRequest string) string {
	sum := sha256.Sum256([]byte(canonicalRequest))
	return signingAlgorithm + "\n" + amzDate + "\n" + scope + "\n" + hex.EncodeToString(sum[:])
}

// deriveSigningKey derives the SigV4 signing key for a credential scope of
// the form date/region/service/aws4_request.
func deriveSigningKey(secret, scope string) []byte {
	key := []byte("AWS4" + secret)
	for _, part := range strings.Split(scope, "/") {
		key = hmacSHA256(key, part)
	}
	return key
}

func hmacSHA256(key []byte, data string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(data))
	return h.Sum(nil)
}

// subtleNotEqual reports whether a and b differ, in constant time.
func subtleNotEqual(a, b string) bool {
	return !hmac.Equal([]byte(a), []byte(b))
}

// parseSignedHeaders splits and validates a SignedHeaders value: lowercase
// names separated by ';', which must include host.
func parseSignedHeaders(v string, malformed func(string, ...any) *s3Error) ([]string, *s3Error) {
	names := strings.Split(v, ";")
	hasHost := false
	for _, n := range names {
		if n == "" || n != strings.ToLower(n) || strings.TrimSpace(n) != n {
			return nil, malformed("invalid signed header name %q.", n)
		}
		if n == "host" {
			hasHost = true
		}
	}
	if !hasHost {
		return nil, accessDenied("The host header must be signed")
	}
	return names, nil
}

// checkAllAmzHeadersSigned rejects requests carrying x-amz-* headers that are
// not covered by the signature, as S3 does: otherwise anybody holding a
// presigned URL could, for example, attach metadata or an ACL.
func checkAllAmzHeadersSigned(r *http.Request, signed []string) *s3Error {
	set := make(map[string]bool, len(signed))
	for _, n := range signed {
		set[n] = true
	}
	var unsigned []string
	for name := range r.Header {
		l := strings.ToLower(name)
		if strings.HasPrefix(l, "x-amz-") && !set[l] {
			unsigned = append(unsigned, l)
		}
	}
	if len(unsigned) > 0 {
		sort.Strings(unsigned)
		return accessDenied("There were headers present in the request which were not signed: %s", strings.Join(unsigned, ", "))
	}
	return nil
}

// canonicalHeaders renders the signed headers as "name:value\n" lines. Values
// are trimmed, runs of spaces are collapsed and repeated headers are joined
// with commas. Go's server moves the Host header to r.Host.
func canonicalHeaders(r *http.Request, signed []string) string {
	var b strings.Builder
	for _, name := range signed {
		var values []string
		switch name {
		case "host":
			values = []string{r.Host}
		default:
			values = r.Header.Values(name)
		}
		b.WriteString(name)
		b.WriteByte(':')
		for i, v := range values {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(trimAll(v))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// trimAll trims spaces and collapses runs of spaces into one.
func trimAll(v string) string {
	v = strings.TrimSpace(v)
	if !strings.Contains(v, "  ") {
		return v
	}
	var b strings.Builder
	space := false
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c == ' ' {
			if space {
				continue
			}
			space = true
		} else {
			space = false
		}
		b.WriteByte(c)
	}
	return b.String()
}

// canonicalURIPath returns the canonical URI for a request path as sent on the
// wire (r.URL.EscapedPath()). S3 URI-encodes every path segment exactly once,
// so each segment is decoded and re-encoded; this makes the result independent
// of how the client chose to escape characters outside the unreserved set,
// while an escaped "/" (%2F) stays part of its segment.
func canonicalURIPath(escapedPath string) (string, error) {
	if escapedPath == "" {
		return "/", nil
	}
	segments := strings.Split(escapedPath, "/")
	for i, seg := range segments {
		dec, err := url.PathUnescape(seg)
		if err != nil {
			return "", err
		}
		segments[i] = uriEncode(dec, true)
	}
	return strings.Join(segments, "/"), nil
}

// uriEncode percent-encodes every byte outside the unreserved set
// (A-Z a-z 0-9 - . _ ~) with uppercase hex, as SigV4 requires. '/' is kept
// unless encodeSlash is set.
func uriEncode(s string, encodeSlash bool) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isUnreserved(c) || (c == '/' && !encodeSlash) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
	return b.String()
}

func isUnreserved(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

// parseQuery decodes a raw query string into its parameters, keeping
// duplicates and parameters without '='. '+' decodes to a space, as with
// url.ParseQuery.
func parseQuery(raw string) ([]queryParam, error) {
	var params []queryParam
	for _, part := range strings.Split(raw, "&") {
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		name, err := url.QueryUnescape(k)
		if err != nil {
			return nil, err
		}
		value, err := url.QueryUnescape(v)
		if err != nil {
			return nil, err
		}
		params = append(params, queryParam{name, value})
	}
	return params, nil
}

func hasParam(params []queryParam, name string) bool {
	for _, p := range params {
		if p.name == name {
			return true
		}
	}
	return false
}

// canonicalQuery encodes each name and value, sorts the pairs by encoded name
// then value and joins them. The parameter named skip (the signature of a
// presigned URL) is left out.
func canonicalQuery(params []queryParam, skip string) string {
	enc := make([]queryParam, 0, len(params))
	for _, p := range params {
		if skip != "" && p.name == skip {
			continue
		}
		enc = append(enc, queryParam{uriEncode(p.name, true), uriEncode(p.value, true)})
	}
	sort.Slice(enc, func(i, j int) bool {
		if enc[i].name != enc[j].name {
			return enc[i].name < enc[j].name
		}
		return enc[i].value < enc[j].value
	})
	var b strings.Builder
	for i, p := range enc {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(p.name)
		b.WriteByte('=')
		b.WriteString(p.value)
	}
	return b.String()
}

// validPayloadHash reports whether v is an x-amz-content-sha256 value S3
// accepts with header authentication.
func validPayloadHash(v string) bool {
	switch v {
	case payloadUnsigned, payloadStreamingSigned, payloadStreamingSignedTrailer, payloadStreamingUnsignedTrailer:
		return true
	}
	return isHexSHA256(v)
}

func isHexSHA256(v string) bool {
	if len(v) != 2*sha256.Size {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
