package httpapi

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/botforge/platform/shared/signin"
)

// TestConsoleRolesMatchRoutes: the console's role.js names, for each
// action it turns off, the least role and the operations behind it; that
// role must be each named operation's `role:` in the route tables, so the
// console never hides what the API allows nor offers what it refuses.
func TestConsoleRolesMatchRoutes(t *testing.T) {
	src, err := os.ReadFile("../console/static/role.js")
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(Config{})
	s.signin = &signin.Service{} // its routes are listed only with a sign-in service
	roles := map[string]string{}
	for _, a := range []Area{AreaAdmin, AreaChat, AreaTables, AreaFiles} {
		for _, r := range s.routes(a) {
			roles[r.op] = string(r.role)
		}
	}
	line := regexp.MustCompile(`(?m)^\s*(?:'([^']+)'|"([^"]+)"): '([a-z]+)', // (.*)$`)
	word := regexp.MustCompile(`[a-z][A-Za-z]+`)
	matches := line.FindAllStringSubmatch(string(src), -1)
	if len(matches) < 5 {
		t.Fatalf("found %d entries of NEED in role.js: is the pattern still right?", len(matches))
	}
	for _, m := range matches {
		action, need := m[1]+m[2], m[3]
		checked := 0
		for _, op := range word.FindAllString(m[4], -1) {
			role, ok := roles[op]
			if !ok {
				continue // a word of the comment, not an operation
			}
			checked++
			if role != need {
				t.Errorf("role.js: %q needs %s, but %s needs %s in the route tables", action, need, op, role)
			}
		}
		if checked == 0 {
			t.Errorf("role.js: %q names no operation of the route tables (%s)", action, strings.TrimSpace(m[4]))
		}
	}
}
