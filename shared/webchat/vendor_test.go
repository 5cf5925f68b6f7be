package webchat_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strings"
	"testing"
)

func sha256hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// readSums reads static/vendor/SHA256SUMS (scripts/webchat/vendor.sh).
func readSums(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("static/vendor/SHA256SUMS")
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && !strings.HasPrefix(line, "#") {
			sums[f[1]] = f[0]
		}
	}
	return sums
}

// TestVendoredChecksums: the vendored files are those vendor.sh recorded.
func TestVendoredChecksums(t *testing.T) {
	for name, want := range readSums(t) {
		b, err := os.ReadFile("static/vendor/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if got := sha256hex(b); got != want {
			t.Fatalf("static/vendor/%s: sha256 %s, SHA256SUMS says %s (run scripts/webchat/vendor.sh)", name, got, want)
		}
	}
}
