package console

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

// The health page's chart library is the files scripts/health/vendor.sh
// copied from the pinned uplot package (vendor.sh --check compares them
// with the package itself), and the page imports it.
func TestVendoredChartLibrary(t *testing.T) {
	sums := assets["vendor/uplot/SHA256SUMS"]
	if sums == nil {
		t.Fatal("vendor/uplot/SHA256SUMS is missing")
	}
	n := 0
	sc := bufio.NewScanner(strings.NewReader(string(sums.body)))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		f := strings.Fields(line)
		a := assets["vendor/uplot/"+f[1]]
		if a == nil {
			t.Errorf("vendor/uplot/%s is missing", f[1])
			continue
		}
		if sum := sha256.Sum256(a.body); hex.EncodeToString(sum[:]) != f[0] {
			t.Errorf("vendor/uplot/%s does not match SHA256SUMS: run scripts/health/vendor.sh", f[1])
		}
		n++
	}
	if n != 3 {
		t.Errorf("SHA256SUMS lists %d files, want 3 (the module, its stylesheet, its license)", n)
	}
	if !strings.Contains(string(assets["health.js"].body), `from './vendor/uplot/uPlot.esm.js'`) {
		t.Error("health.js does not import the vendored uPlot")
	}
}
