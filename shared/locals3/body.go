package locals3

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"hash"
	"hash/crc32"
	"hash/crc64"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/botforge/platform/shared/platform"
)

// MaxObjectSize is the largest payload accepted in one request (and the
// largest object a multipart upload may assemble): S3's 5 GiB for one PUT,
// the same limit as upsertFile's (platform.MaxObjectSize). Single PUTs and
// GETs are streamed to and from disk, whatever their size.
const MaxObjectSize = platform.MaxObjectSize

// MaxPartSize bounds one part of a multipart upload (S3 allows 5 GiB):
// gofakes3 keeps the parts in memory until the upload completes. The
// platform never uploads in parts; this only keeps other clients of the
// embedded S3 from exhausting memory.
const MaxPartSize = 64 << 20

const (
	// spoolMemoryLimit is how much of a request body is buffered in memory
	// before spilling to a temporary file.
	spoolMemoryLimit = 1 << 20
	// maxChunkLine bounds an aws-chunked chunk header or trailer line.
	maxChunkLine = 4096
	// maxTrailers bounds the number of aws-chunked trailer lines.
	maxTrailers = 16

	emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

	headerDecodedContentLength = "X-Amz-Decoded-Content-Length"
	headerTrailer              = "X-Amz-Trailer"
	trailerSignatureName       = "x-amz-trailer-signature"
)

var (
	crc32cTable    = crc32.MakeTable(crc32.Castagnoli)
	crc64NVMETable = crc64.MakeTable(0x9a6c9329ac4bc9b5) // reversed CRC-64/NVME polynomial
)

// checksumAlgorithms are the flexible checksums (x-amz-checksum-*) this server
// verifies, by lowercase header name. Others are accepted unverified.
var checksumAlgorithms = map[string]func() hash.Hash{
	"x-amz-checksum-crc32":     func() hash.Hash { return crc32.NewIEEE() },
	"x-amz-checksum-crc32c":    func() hash.Hash { return crc32.New(crc32cTable) },
	"x-amz-checksum-crc64nvme": func() hash.Hash { return crc64.New(crc64NVMETable) },
	"x-amz-checksum-sha1":      sha1.New,
	"x-amz-checksum-sha256":    sha256.New,
}

// checksum is an expected flexible checksum and the hash computing it.
type checksum struct {
	name     string // lowercase header name, e.g. x-amz-checksum-crc32
	expected string // base64, from a header or (later) a trailer
	hash     hash.Hash
}

func (c *checksum) verify() *s3Error {
	want, err := base64.StdEncoding.DecodeString(c.expected)
	if err != nil || len(want) != c.hash.Size() {
		return newError(http.StatusBadRequest, codeInvalidRequest, "Value for %s is invalid.", c.name)
	}
	if !bytes.Equal(want, c.hash.Sum(nil)) {
		alg := strings.ToUpper(strings.TrimPrefix(c.name, "x-amz-checksum-"))
		return newError(http.StatusBadRequest, codeBadDigest, "The %s you specified did not match the calculated checksum.", alg)
	}
	return nil
}

// headerChecksums returns the verifiable x-amz-checksum-* headers of h.
func headerChecksums(h http.Header) []*checksum {
	var out []*checksum
	for name, values := range h {
		l := strings.ToLower(name)
		if newHash, ok := checksumAlgorithms[l]; ok && len(values) > 0 {
			out = append(out, &checksum{name: l, expected: values[0], hash: newHash()})
		}
	}
	return out
}

// prepareBody verifies the request payload against what was signed (hex
// SHA-256 or aws-chunked chunk signatures) and against any flexible checksums,
// then replaces r.Body with the verified, decoded payload and fixes up
// Content-Length, so that gofakes3 sees a plain request. Payloads that need
// verification are spooled (memory, then a temporary file) before anything is
// stored; unsigned payloads without checksums are streamed through.
//
// The returned cleanup function must be called once the request is done.
func (s *Server) prepareBody(w http.ResponseWriter, r *http.Request, a *authInfo) (cleanup func(), e *s3Error) {
	noop := func() {}
	switch a.payloadHash {
	case payloadStreamingSigned, payloadStreamingSignedTrailer, payloadStreamingUnsignedTrailer:
		return s.decodeChunked(r, a)
	}

	limit := bodyLimit(r)
	if r.ContentLength > limit {
		return noop, entityTooLarge(limit)
	}
	sums := headerChecksums(r.Header)
	verifySHA := isHexSHA256(a.payloadHash)
	if !verifySHA && len(sums) == 0 {
		if r.ContentLength != 0 {
			r.Body = http.MaxBytesReader(w, r.Body, limit)
		}
		return noop, nil
	}

	sp := &spool{dir: s.tmpDir}
	writers := []io.Writer{sp}
	var sha hash.Hash
	if verifySHA {
		sha = sha256.New()
		writers = append(writers, sha)
	}
	for _, c := range sums {
		writers = append(writers, c.hash)
	}
	n, err := io.Copy(io.MultiWriter(writers...), io.LimitReader(r.Body, limit+1))
	if err != nil {
		sp.close()
		return noop, bodyReadError(err)
	}
	if n > limit {
		sp.close()
		return noop, entityTooLarge(limit)
	}
	if verifySHA && hex.EncodeToString(sha.Sum(nil)) != a.payloadHash {
		sp.close()
		return noop, newError(http.StatusBadRequest, codeContentSHA256Mismatch,
			"The provided 'x-amz-content-sha256' header does not match what was computed.")
	}
	for _, c := range sums {
		if e := c.verify(); e != nil {
			sp.close()
			return noop, e
		}
	}
	if err := sp.install(r); err != nil {
		sp.close()
		return noop, internalError(err)
	}
	return sp.close, nil
}

// decodeChunked decodes (and, for the signed variants, verifies) an
// aws-chunked payload:
//
//	<hex size>[;chunk-signature=<sig>]\r\n<data>\r\n ... 0[;chunk-signature=<sig>]\r\n
//	[<trailer name>:<value>\r\n ...][x-amz-trailer-signature:<sig>\r\n]\r\n
//
// See https://docs.aws.amazon.com/AmazonS3/latest/API/sigv4-streaming.html
// and sigv4-streaming-trailers.html.
func (s *Server) decodeChunked(r *http.Request, a *authInfo) (cleanup func(), e *s3Error) {
	noop := func() {}
	signedChunks := a.payloadHash != payloadStreamingUnsignedTrailer
	withTrailer := a.payloadHash != payloadStreamingSigned

	declStr := r.Header.Get(headerDecodedContentLength)
	if declStr == "" {
		return noop, newError(http.StatusLengthRequired, codeMissingContentLength,
			"You must provide the x-amz-decoded-content-length header with an aws-chunked payload.")
	}
	decodedLen, err := strconv.ParseInt(declStr, 10, 64)
	if err != nil || decodedLen < 0 {
		return noop, newError(http.StatusBadRequest, codeInvalidArgument, "Invalid x-amz-decoded-content-length %q", declStr)
	}
	if limit := bodyLimit(r); decodedLen > limit {
		return noop, entityTooLarge(limit)
	}

	declared := map[string]bool{}
	for _, v := range r.Header.Values(headerTrailer) {
		for _, name := range strings.Split(v, ",") {
			if name = strings.ToLower(strings.TrimSpace(name)); name != "" {
				declared[name] = true
			}
		}
	}
	if withTrailer && len(declared) == 0 {
		return noop, newError(http.StatusBadRequest, codeInvalidRequest, "The x-amz-trailer header is required with x-amz-content-sha256: %s", a.payloadHash)
	}
	if !withTrailer && len(declared) > 0 {
		return noop, newError(http.StatusBadRequest, codeInvalidRequest, "The x-amz-trailer header is not allowed with x-amz-content-sha256: %s", a.payloadHash)
	}

	sums := headerChecksums(r.Header)
	trailerSums := map[string]*checksum{}
	for name := range declared {
		if newHash, ok := checksumAlgorithms[name]; ok {
			c := &checksum{name: name, hash: newHash()}
			trailerSums[name] = c
			sums = append(sums, c)
		}
	}

	sp := &spool{dir: s.tmpDir}
	writers := []io.Writer{sp}
	for _, c := range sums {
		writers = append(writers, c.hash)
	}
	dst := io.MultiWriter(writers...)
	fail := func(e *s3Error) (func(), *s3Error) {
		sp.close()
		return noop, e
	}
	malformed := func(format string, args ...any) (func(), *s3Error) {
		return fail(newError(http.StatusBadRequest, codeIncompleteBody, "Malformed aws-chunked payload: "+format, args...))
	}

	br := bufio.NewReaderSize(r.Body, 64<<10)
	prevSig := a.signature
	var total int64
	for {
		line, err := readLine(br)
		if err != nil {
			return fail(bodyReadError(err))
		}
		sizeStr, ext, _ := strings.Cut(line, ";")
		size, err := strconv.ParseInt(strings.TrimSpace(sizeStr), 16, 64)
		if err != nil || size < 0 {
			return fail(newError(http.StatusBadRequest, codeInvalidChunkSizeError, "Invalid aws-chunked chunk size %q", sizeStr))
		}
		if size > decodedLen-total {
			return malformed("the chunks are longer than x-amz-decoded-content-length (%d)", decodedLen)
		}
		var chunkSig string
		if signedChunks {
			v, ok := strings.CutPrefix(strings.TrimSpace(ext), "chunk-signature=")
			if !ok || v == "" {
				return fail(newError(http.StatusForbidden, codeSignatureDoesNotMatch, "aws-chunked chunk is missing its chunk-signature"))
			}
			chunkSig = v
		}

		var chunkHash hash.Hash
		w := dst
		if signedChunks {
			chunkHash = sha256.New()
			w = io.MultiWriter(dst, chunkHash)
		}
		if _, err := io.CopyN(w, br, size); err != nil {
			return fail(bodyReadError(err))
		}
		if signedChunks {
			sts := "AWS4-HMAC-SHA256-PAYLOAD\n" + a.amzDate + "\n" + a.scope + "\n" + prevSig + "\n" +
				emptySHA256 + "\n" + hex.EncodeToString(chunkHash.Sum(nil))
			want := hex.EncodeToString(hmacSHA256(a.signingKey, sts))
			if !hmac.Equal([]byte(want), []byte(strings.ToLower(chunkSig))) {
				return fail(newError(http.StatusForbidden, codeSignatureDoesNotMatch,
					"The chunk signature we calculated does not match the chunk-signature you provided (chunk ending at byte %d).", total+size))
			}
			prevSig = want
		}
		total += size
		if size == 0 {
			break
		}
		if crlf, err := readLine(br); err != nil || crlf != "" {
			if err != nil {
				return fail(bodyReadError(err))
			}
			return malformed("chunk data is not followed by CRLF")
		}
	}
	if total != decodedLen {
		return malformed("decoded %d bytes, but x-amz-decoded-content-length is %d", total, decodedLen)
	}

	// Trailer section, terminated by an empty line. Some clients end the
	// body without that final CRLF; missing trailers are detected below.
	trailers := map[string]string{}
	var trailerSig string
	for i := 0; ; i++ {
		line, err := readLine(br)
		if err == io.EOF {
			break
		}
		if err != nil {
			return fail(bodyReadError(err))
		}
		if line == "" {
			break
		}
		if i >= maxTrailers {
			return fail(newError(http.StatusBadRequest, codeMalformedTrailerError, "Too many trailers"))
		}
		name, value, ok := strings.Cut(line, ":")
		name, value = strings.ToLower(strings.TrimSpace(name)), strings.TrimSpace(value)
		switch {
		case !ok:
			return fail(newError(http.StatusBadRequest, codeMalformedTrailerError, "The request contained trailing data that was not well-formed"))
		case name == trailerSignatureName && signedChunks && withTrailer && trailerSig == "":
			trailerSig = value
		case !declared[name]:
			return fail(newError(http.StatusBadRequest, codeMalformedTrailerError, "The trailer %q was not declared in x-amz-trailer", name))
		case trailers[name] != "":
			return fail(newError(http.StatusBadRequest, codeMalformedTrailerError, "The trailer %q is repeated", name))
		default:
			trailers[name] = value
		}
	}
	if _, err := br.ReadByte(); err != io.EOF {
		if err != nil {
			return fail(bodyReadError(err))
		}
		return malformed("unexpected data after the final chunk")
	}
	for name := range declared {
		if trailers[name] == "" {
			return fail(newError(http.StatusBadRequest, codeMalformedTrailerError, "The declared trailer %q is missing", name))
		}
	}

	if signedChunks && withTrailer {
		names := make([]string, 0, len(trailers))
		for name := range trailers {
			names = append(names, name)
		}
		sort.Strings(names)
		var canon strings.Builder
		for _, name := range names {
			canon.WriteString(name + ":" + trailers[name] + "\n")
		}
		sum := sha256.Sum256([]byte(canon.String()))
		sts := "AWS4-HMAC-SHA256-TRAILER\n" + a.amzDate + "\n" + a.scope + "\n" + prevSig + "\n" + hex.EncodeToString(sum[:])
		want := hex.EncodeToString(hmacSHA256(a.signingKey, sts))
		if trailerSig == "" || !hmac.Equal([]byte(want), []byte(strings.ToLower(trailerSig))) {
			return fail(newError(http.StatusForbidden, codeSignatureDoesNotMatch,
				"The trailer signature we calculated does not match the x-amz-trailer-signature you provided."))
		}
	}

	for name, c := range trailerSums {
		c.expected = trailers[name]
	}
	for _, c := range sums {
		if e := c.verify(); e != nil {
			return fail(e)
		}
	}

	if err := sp.install(r); err != nil {
		return fail(internalError(err))
	}
	// The payload is plain now: drop the aws-chunked framing headers so they
	// are neither interpreted again nor stored as object metadata.
	removeContentEncoding(r.Header, "aws-chunked")
	return sp.close, nil
}

// readLine reads a CRLF-terminated line of at most maxChunkLine bytes and
// returns it without the CRLF.
func readLine(br *bufio.Reader) (string, error) {
	line, err := br.ReadSlice('\n')
	if err == bufio.ErrBufferFull || len(line) > maxChunkLine {
		return "", errMalformedChunk
	}
	if err != nil {
		if err == io.EOF && len(line) > 0 {
			return "", io.ErrUnexpectedEOF
		}
		return "", err
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return "", errMalformedChunk
	}
	return string(line[:len(line)-2]), nil
}

var errMalformedChunk = errors.New("malformed aws-chunked line")

// removeContentEncoding removes one coding from Content-Encoding, deleting
// the header when nothing is left.
func removeContentEncoding(h http.Header, coding string) {
	var keep []string
	for _, v := range h.Values("Content-Encoding") {
		for _, c := range strings.Split(v, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, coding) {
				keep = append(keep, c)
			}
		}
	}
	if len(keep) == 0 {
		h.Del("Content-Encoding")
		return
	}
	h.Set("Content-Encoding", strings.Join(keep, ","))
}

func entityTooLarge(limit int64) *s3Error {
	return newError(http.StatusBadRequest, codeEntityTooLarge,
		"Your proposed upload exceeds the maximum allowed size of %d bytes.", limit)
}

// bodyLimit is the largest payload r may carry: a part of a multipart
// upload (held in memory) MaxPartSize, anything else MaxObjectSize.
func bodyLimit(r *http.Request) int64 {
	q := r.URL.Query()
	if r.Method == http.MethodPut && q.Has("uploadId") && q.Has("partNumber") {
		return MaxPartSize
	}
	return MaxObjectSize
}

func internalError(err error) *s3Error {
	return newError(http.StatusInternalServerError, codeInternalError, "We encountered an internal error: %v", err)
}

// bodyReadError maps an error met while consuming the request body.
func bodyReadError(err error) *s3Error {
	var we *spoolWriteError
	switch {
	case errors.As(err, &we):
		return internalError(we.err)
	case errors.Is(err, errMalformedChunk):
		return newError(http.StatusBadRequest, codeIncompleteBody, "Malformed aws-chunked payload: a chunk header or trailer line is invalid.")
	default:
		return newError(http.StatusBadRequest, codeIncompleteBody, "You did not provide the number of bytes specified by the Content-Length HTTP header (%v).", err)
	}
}

// spool buffers a request body in memory up to spoolMemoryLimit and in a
// temporary file beyond that.
type spool struct {
	dir  string
	mem  bytes.Buffer
	file *os.File
	n    int64
}

// spoolWriteError marks failures of the spool itself (as opposed to the
// client's body).
type spoolWriteError struct{ err error }

func (e *spoolWriteError) Error() string { return "spooling request body: " + e.err.Error() }

func (s *spool) Write(p []byte) (int, error) {
	if s.file == nil && s.mem.Len()+len(p) > spoolMemoryLimit {
		f, err := os.CreateTemp(s.dir, "upload-*")
		if err != nil {
			return 0, &spoolWriteError{err}
		}
		s.file = f
		if _, err := s.mem.WriteTo(f); err != nil {
			return 0, &spoolWriteError{err}
		}
	}
	s.n += int64(len(p))
	if s.file == nil {
		return s.mem.Write(p)
	}
	n, err := s.file.Write(p)
	if err != nil {
		return n, &spoolWriteError{err}
	}
	return n, nil
}

// install makes the spooled data the request body.
func (s *spool) install(r *http.Request) error {
	var body io.Reader = bytes.NewReader(s.mem.Bytes())
	if s.file != nil {
		if _, err := s.file.Seek(0, io.SeekStart); err != nil {
			return err
		}
		body = s.file
	}
	if s.n == 0 {
		r.Body = http.NoBody
	} else {
		r.Body = io.NopCloser(body)
	}
	r.ContentLength = s.n
	r.TransferEncoding = nil
	r.Header.Set("Content-Length", strconv.FormatInt(s.n, 10))
	return nil
}

// close releases the memory and deletes the temporary file, if any.
func (s *spool) close() {
	s.mem = bytes.Buffer{}
	if s.file != nil {
		name := s.file.Name()
		_ = s.file.Close()
		_ = os.Remove(name)
		s.file = nil
	}
}
