package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestInfraTargetRerunsOnTemplateChange: `make infra` runs its tests so that
// an edited ../template.yaml is always checked again. The go test cache
// does not see it: a test's inputs are tracked only inside its module, and
// template.yaml is outside this one (infra/ is its own module). The test
// runs the go test command of the Makefile's infra target twice on a
// canary module laid out the same way (a test reading ../template.yaml),
// editing the template in between: the second run must run, and fail.
func TestInfraTargetRerunsOnTemplateChange(t *testing.T) {
	out, err := exec.Command("make", "-s", "-n", "-C", "..", "infra").CombinedOutput()
	if err != nil {
		t.Fatalf("make -n infra: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`go test((?: +-[^ \n]+)*) +\./\.\.\.`).FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("no `go test ... ./...` in the infra target:\n%s", out)
	}
	flags := strings.Fields(m[1])

	dir := t.TempDir()
	mod := filepath.Join(dir, "infra")
	write := func(path, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(mod, "go.mod"), "module canary\n\ngo 1.22\n")
	write(filepath.Join(mod, "canary_test.go"), `package canary

import (
	"os"
	"strings"
	"testing"
)

func TestTemplate(t *testing.T) {
	b, err := os.ReadFile("../template.yaml")
	if err != nil || strings.Contains(string(b), "drift") {
		t.Fatalf("template: %q %v", b, err)
	}
}
`)
	run := func() (string, error) {
		cmd := exec.Command("go", append(append([]string{"test"}, flags...), "./...")...)
		cmd.Dir = mod
		cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	write(filepath.Join(dir, "template.yaml"), "agreed\n")
	if out, err := run(); err != nil {
		t.Fatalf("first run: %v\n%s", err, out)
	}
	write(filepath.Join(dir, "template.yaml"), "drift\n")
	if out, err := run(); err == nil {
		t.Fatalf("go test %s passed on an edited template.yaml (the cached result of the previous run):\n%s", strings.Join(flags, " "), out)
	}
}
