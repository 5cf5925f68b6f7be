package platform

import "strings"

// maxEmailLen is the longest address SMTP can carry (RFC 5321: 254).
const maxEmailLen = 254

// ValidateEmail checks an address an invitation is sent to before anything
// is written for it. It is stricter than RFC 5322 on purpose: an address
// names an account for good, and locally its first token is written to a
// file named after it, so only a plain local part (letters, digits and
// . _ % + - ') and a host name of letter/digit/hyphen labels are accepted;
// no quoting, no comments, no / or \, no leading, trailing or double dot.
func ValidateEmail(email string) error {
	bad := func(why string) error {
		return Invalid("invalid body: field \"email\": %q is not an accepted email address: %s", email, why)
	}
	if len(email) > maxEmailLen {
		return bad("longer than 254 characters")
	}
	local, host, ok := strings.Cut(email, "@")
	if !ok || local == "" || host == "" {
		return bad("it must be local-part@host")
	}
	if !dotted(local, func(r rune) bool {
		return isAlnum(r) || strings.ContainsRune("._%+-'", r)
	}) || len(local) > 64 {
		return bad("the part before @ may hold only letters, digits and . _ % + - ' (at most 64, no leading, trailing or double dot)")
	}
	for _, label := range strings.Split(host, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return bad("the host must be dot-separated labels of letters, digits and inner hyphens")
		}
		for _, r := range label {
			if !isAlnum(r) && r != '-' {
				return bad("the host must be dot-separated labels of letters, digits and inner hyphens")
			}
		}
	}
	return nil
}

// dotted reports whether s is made of runes accepted by ok, with no
// leading, trailing or repeated dot.
func dotted(s string, ok func(rune) bool) bool {
	if strings.HasPrefix(s, ".") || strings.HasSuffix(s, ".") || strings.Contains(s, "..") {
		return false
	}
	for _, r := range s {
		if !ok(r) {
			return false
		}
	}
	return true
}

func isAlnum(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
}
