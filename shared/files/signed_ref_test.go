package files

import (
	"testing"
	"time"
)

func TestSignedRefExpires(t *testing.T) {
	key := []byte("k")
	ref := Ref{ID: "file_1", Size: 3, ContentType: "text/plain", Filename: "a.txt", Checksum: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}
	signedAt := time.Date(2026, 1, 1, 10, 30, 0, 0, time.UTC)
	exp := SignedExpiry(signedAt)
	if got := time.Unix(exp, 0).UTC(); !got.Equal(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)) {
		t.Fatalf("expiry %s", got)
	}
	parsed, err := ParseRef(ref.ID, ref.SignedQuery(key, exp))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		key  []byte
		at   time.Time
		ok   bool
	}{
		{"valid", key, signedAt, true},
		{"a second before expiry", key, time.Unix(exp-1, 0), true},
		{"expired", key, time.Unix(exp, 0), false},
		{"another key", []byte("other"), signedAt, false},
	} {
		if err := parsed.CheckSignature(tc.key, tc.at); (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
