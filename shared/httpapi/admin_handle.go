package httpapi

import (
	"regexp"
	"strconv"
	"strings"
)

// workspaceHandle is what updateWorkspace accepts as a handle (the
// reference's pattern): lower-case letters, digits, - and _, at least 3
// characters, starting and ending with a letter or digit.
var workspaceHandle = regexp.MustCompile(`^[0-9a-z][a-z0-9-_]+[0-9a-z]$`)

const maxHandle = 50 // checkHandleAvailability's limit (updateWorkspace's is 64)

// checkHandleAvailability tells whether updateWorkspace would accept a
// handle now: well formed and held by no workspace. It only reads (one
// GetItem per handle looked at); taking a handle stays updateWorkspace's
// conditional write, so two workspaces told "available" cannot both get it.
// Suggestions are free handles derived from the asked one.
func (s *server) checkHandleAvailability(c *call) (any, error) {
	var in struct {
		Handle string `json:"handle"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	type out struct {
		Available   bool     `json:"available"`
		Suggestions []string `json:"suggestions"`
	}
	res := out{Suggestions: []string{}}
	if workspaceHandle.MatchString(in.Handle) {
		_, taken, err := s.Store.WorkspaceByHandle(c.ctx, in.Handle)
		if err != nil {
			return nil, err
		}
		if !taken {
			res.Available = true
			return res, nil
		}
	}
	// A well-formed stem to suffix: separators trimmed, at least 3 characters.
	base := strings.Trim(in.Handle, "-_")
	for len(base) < 3 {
		base += "0"
	}
	const wanted, maxLookups = 3, 10
	for i := 1; i <= maxLookups && len(res.Suggestions) < wanted; i++ {
		suffix := "-" + strconv.Itoa(i)
		cand := base
		if len(cand)+len(suffix) > maxHandle {
			cand = strings.TrimRight(cand[:maxHandle-len(suffix)], "-_")
		}
		cand += suffix
		if !workspaceHandle.MatchString(cand) {
			continue
		}
		_, taken, err := s.Store.WorkspaceByHandle(c.ctx, cand)
		if err != nil {
			return nil, err
		}
		if !taken {
			res.Suggestions = append(res.Suggestions, cand)
		}
	}
	return res, nil
}
