package signin

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"strings"
	"unicode/utf8"

	"golang.org/x/crypto/argon2"

	"github.com/botforge/platform/shared/platform"
)

// Passwords are hashed with argon2id at OWASP's recommended parameters
// (m=19 MiB, t=2, p=1), stored in the PHC string format so parameters can
// be raised later without breaking older hashes.
const (
	argonMemory  = 19 * 1024
	argonTime    = 2
	argonThreads = 1
	argonKeyLen  = 32
	argonSaltLen = 16

	MinPasswordLen = 8
	// MaxPasswordLen bounds the work of one hash (long passphrases pass).
	MaxPasswordLen = 1024
)

// CheckPassword tells whether a new password is acceptable.
func CheckPassword(pw string) error {
	n := utf8.RuneCountInString(pw)
	if n < MinPasswordLen {
		return platform.Invalid("the password must be at least %d characters", MinPasswordLen)
	}
	if len(pw) > MaxPasswordLen {
		return platform.Invalid("the password must be at most %d bytes", MaxPasswordLen)
	}
	return nil
}

// HashPassword hashes pw with a fresh salt.
func HashPassword(pw string) string {
	salt := make([]byte, argonSaltLen)
	_, _ = rand.Read(salt)
	sum := argon2.IDKey([]byte(pw), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	b64 := base64.RawStdEncoding.EncodeToString
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemory, argonTime, argonThreads, b64(salt), b64(sum))
}

// dummyHash is verified when there is no account (or no password) to
// check, so that a sign-in takes the same time either way.
var dummyHash = HashPassword("not a password of anyone")

// VerifyPassword tells whether pw matches hash (in constant time over the
// hash's parameters); a malformed hash matches nothing.
func VerifyPassword(hash, pw string) bool {
	if len(pw) > MaxPasswordLen {
		pw = pw[:MaxPasswordLen]
	}
	parts := strings.Split(hash, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		parts = strings.Split(dummyHash, "$")
		argonCheck(parts, pw)
		return false
	}
	return argonCheck(parts, pw)
}

func argonCheck(parts []string, pw string) bool {
	var m uint32
	var t uint32
	var p uint8
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &m, &t, &p); err != nil || m == 0 || t == 0 || p == 0 || m > 1<<20 || t > 20 {
		return false
	}
	salt, err1 := base64.RawStdEncoding.DecodeString(parts[4])
	want, err2 := base64.RawStdEncoding.DecodeString(parts[5])
	if err1 != nil || err2 != nil || len(want) == 0 {
		return false
	}
	got := argon2.IDKey([]byte(pw), salt, t, m, p, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1
}
