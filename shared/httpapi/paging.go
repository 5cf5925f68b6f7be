package httpapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/platform"
)

// Page sizes of the paginated lists.
const (
	defaultPageSize = 20
	maxPageSize     = 100
)

// pager makes nextTokens: the position to resume from, signed with an HMAC
// over the list it belongs to (operation, scope and filters). A token cannot
// be forged, altered, or replayed against another list or tenant.
type pager struct{ key []byte }

func (p pager) sign(list, payload string) string {
	m := hmac.New(sha256.New, p.key)
	m.Write([]byte(list))
	m.Write([]byte{0})
	m.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func (p pager) encode(list string, k map[string]string) string {
	if len(k) == 0 {
		return ""
	}
	b, _ := json.Marshal(k)
	payload := base64.RawURLEncoding.EncodeToString(b)
	return payload + "." + p.sign(list, payload)
}

var errBadToken = platform.Invalid("invalid nextToken: pass meta.nextToken of the previous page of the same list unchanged")

func (p pager) decode(list, token string) (map[string]string, error) {
	payload, sig, ok := strings.Cut(token, ".")
	if !ok || !hmac.Equal([]byte(sig), []byte(p.sign(list, payload))) {
		return nil, errBadToken
	}
	b, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return nil, errBadToken
	}
	var k map[string]string
	if err := json.Unmarshal(b, &k); err != nil || len(k) == 0 {
		return nil, errBadToken
	}
	return k, nil
}

// page reads pageSize and nextToken of a list call. list identifies the list
// (operation, scope and every filter) so a token only continues its own list.
func (c *call) page(list string) (dynamo.Page, error) {
	q := c.query()
	p := dynamo.Page{Limit: defaultPageSize}
	size, err := q.str("pageSize")
	if err != nil {
		return p, err
	}
	if size != "" {
		n, err := strconv.Atoi(size)
		if err != nil || n < 1 || n > maxPageSize {
			return p, platform.Invalid("pageSize must be an integer from 1 to %d", maxPageSize)
		}
		p.Limit = int32(n)
	}
	tok, err := q.str("nextToken")
	if err != nil || tok == "" {
		return p, err
	}
	p.Start, err = c.s.pager.decode(c.op+"|"+list, tok)
	return p, err
}

// meta is the pagination part of a list response.
type meta struct {
	NextToken string `json:"nextToken,omitempty"`
}

func (c *call) meta(list string, next map[string]string) meta {
	return meta{NextToken: c.s.pager.encode(c.op+"|"+list, next)}
}
