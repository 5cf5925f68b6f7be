package chatapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
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
	id, ok := claims.ID.(string)
	if !ok || checkID(id) != nil {
		return "", bad
	}
	if claims.Exp != nil && float64(time.Now().Unix()) >= *claims.Exp {
		return "", platform.Errorf(platform.ErrUnauthorized, "invalid x-user-key: it has expired")
	}
	return id, nil
}

// checkID checks an id a client chose (a user's, a conversation's).
func checkID(id string) error {
	if id == "" || len(id) > 100 {
		return platform.Invalid("an id must have 1 to 100 characters")
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-_.:@|+=", c)) {
			return platform.Invalid("id %q: only letters, digits and - _ . : @ | + = are allowed", id)
		}
	}
	return nil
}

// SignUserKey makes a user key of installation in for the user whose Chat
// API id is id, valid until exp (zero: no expiry). The webchat
// integration (shared/webchat) hands such keys out on POST /users/key.
func SignUserKey(in builtin.Install, id string, exp time.Time) (string, error) {
	if err := checkID(id); err != nil {
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
