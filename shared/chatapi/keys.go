package chatapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/botforge/platform/shared/builtin"
	"github.com/botforge/platform/shared/platform"
)

// User keys are HS256 JSON Web Tokens {"id": <user id>}, as the client's
// jsonwebtoken.sign({id}, key, {algorithm: 'HS256'}) makes them. The key is
// the installation's encryptionKey in personal mode, else a secret of the
// installation that never leaves the platform: derived from the
// integration version's signing secret (never shown to anyone) and the
// webhook id, so every process agrees on it without storing it, and a new
// installation (a new webhook id) voids the keys of the old one.

// signingKey is the key that signs and verifies the installation's keys.
func signingKey(in builtin.Install, c config) []byte {
	if c.personal() {
		return []byte(c.EncryptionKey)
	}
	m := hmac.New(sha256.New, []byte(in.Integration.SigningSecret))
	m.Write([]byte("chat user key\x00" + in.Instance.WebhookID))
	return []byte(hex.EncodeToString(m.Sum(nil)))
}

var b64 = base64.RawURLEncoding

// signKey makes a user key for id.
func signKey(key []byte, id string) string {
	h := b64.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))
	p, _ := json.Marshal(map[string]any{"id": id, "iat": time.Now().Unix()})
	msg := h + "." + b64.EncodeToString(p)
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return msg + "." + b64.EncodeToString(m.Sum(nil))
}

// verifyKey checks a user key and answers its user id. Any flaw is a 401
// that does not say which: the signature is checked before anything of
// the token is believed.
func verifyKey(key []byte, token string) (string, error) {
	bad := platform.Errorf(platform.ErrUnauthorized, "invalid x-user-key: not a user key of this Chat API")
	parts := strings.Split(token, ".")
	if len(parts) != 3 || len(token) > 4096 {
		return "", bad
	}
	sig, err := b64.DecodeString(parts[2])
	if err != nil {
		return "", bad
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(parts[0] + "." + parts[1]))
	if !hmac.Equal(sig, m.Sum(nil)) {
		return "", bad
	}
	var head struct {
		Alg string `json:"alg"`
	}
	if hb, err := b64.DecodeString(parts[0]); err != nil || json.Unmarshal(hb, &head) != nil || head.Alg != "HS256" {
		return "", bad
	}
	var claims struct {
		ID  any      `json:"id"`
		Exp *float64 `json:"exp"`
	}
	pb, err := b64.DecodeString(parts[1])
	if err != nil || json.Unmarshal(pb, &claims) != nil {
		return "", bad
	}
	// The id is checked where a user is made (getOrCreateUser), as on
	// Botpress: a well-signed key of an id outside the rule is a 400 there,
	// not a bad key.
	id, ok := claims.ID.(string)
	if !ok || id == "" {
		return "", bad
	}
	if claims.Exp != nil && float64(time.Now().Unix()) >= *claims.Exp {
		return "", platform.Errorf(platform.ErrUnauthorized, "invalid x-user-key: it has expired")
	}
	return id, nil
}

// MaxIDLength is the longest id a client may choose (a user's, a
// conversation's), as on Botpress's chat integration (validate-fid.ts).
const MaxIDLength = 70

// idRule is the rule of a client-chosen id, as its errors state it.
var idRule = fmt.Sprintf("an id has 1 to %d characters among letters, digits, \"_\", \"-\", \"\\\" and \"/\"", MaxIDLength)

// checkID checks an id a client chooses for a new user or conversation
// as Botpress's chat integration does: [a-zA-Z0-9_\-\\/], at most
// MaxIDLength characters; anything else is 400 InvalidPayload stating the
// rule, what naming the id (`invalid body: field "id"`, `the user key's
// id`). Existing records are found by their id whatever it is (ids chosen
// under an earlier, looser rule keep working).
func checkID(what, id string) error {
	if id == "" || len(id) > MaxIDLength {
		return platform.Invalid("%s: %q has %d characters: %s", what, id, len(id), idRule)
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '\\' || c == '/') {
			return platform.Invalid("%s: %q has the character %q: %s", what, id, c, idRule)
		}
	}
	return nil
}

// SignUserKey makes a user key of installation in for the user whose Chat
// API id is id, valid until exp (zero: no expiry). The webchat
// integration (shared/webchat) hands such keys out on POST /users/key.
func SignUserKey(in builtin.Install, id string, exp time.Time) (string, error) {
	if err := checkID(`invalid body: field "id"`, id); err != nil {
		return "", err
	}
	key := signingKey(in, configOf(in))
	if exp.IsZero() {
		return signKey(key, id), nil
	}
	h := b64.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))
	p, _ := json.Marshal(map[string]any{"id": id, "iat": time.Now().Unix(), "exp": exp.Unix()})
	msg := h + "." + b64.EncodeToString(p)
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return msg + "." + b64.EncodeToString(m.Sum(nil)), nil
}
