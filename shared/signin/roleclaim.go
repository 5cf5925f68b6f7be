package signin

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/botforge/platform/shared/platform"
)

// A claim mapped to a workspace role (docs/signin.md, off by default):
// with PLATFORM_OIDC_ROLE_CLAIM and PLATFORM_OIDC_ROLE_MAP, every single
// sign-on sets the account's role in PLATFORM_OIDC_WORKSPACE from the
// claim's values (a string or a list of strings; the highest mapped role
// wins), adding the membership if missing. A sign-on whose claim maps to
// no role is refused before anything is written (no link spent, no
// account created, the membership left as it is): the provider, not a
// stale membership, decides. An owner's role is never changed this way
// (owners are managed in the console; a claim cannot take or give
// ownership).

const (
	// EnvOIDCRoleClaim: the claim (e.g. groups) whose values map to roles.
	EnvOIDCRoleClaim = "PLATFORM_OIDC_ROLE_CLAIM"
	// EnvOIDCRoleMap: value=role pairs, comma-separated, e.g.
	// "bot-admins=administrator,bot-devs=developer".
	EnvOIDCRoleMap = "PLATFORM_OIDC_ROLE_MAP"
)

func roleClaimFromEnv(c *Config, get func(string) string) error {
	c.OIDC.RoleClaim = strings.TrimSpace(get(EnvOIDCRoleClaim))
	raw := strings.TrimSpace(get(EnvOIDCRoleMap))
	for _, pair := range strings.Split(raw, ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		v, r, ok := strings.Cut(pair, "=")
		v, role := strings.TrimSpace(v), platform.Role(strings.TrimSpace(r))
		if !ok || v == "" || !role.Valid() || role == platform.RoleOwner {
			return fmt.Errorf("%s: %q: want value=role pairs, the role one of viewer, billing, developer, manager, administrator", EnvOIDCRoleMap, pair)
		}
		if c.OIDC.RoleMap == nil {
			c.OIDC.RoleMap = map[string]platform.Role{}
		}
		c.OIDC.RoleMap[v] = role
	}
	switch {
	case c.OIDC.RoleClaim == "" && len(c.OIDC.RoleMap) > 0:
		return fmt.Errorf("%s is set but %s is not", EnvOIDCRoleMap, EnvOIDCRoleClaim)
	case c.OIDC.RoleClaim != "" && len(c.OIDC.RoleMap) == 0:
		return fmt.Errorf("%s is set but %s is not", EnvOIDCRoleClaim, EnvOIDCRoleMap)
	case c.OIDC.RoleClaim != "" && c.OIDC.Workspace == "":
		return fmt.Errorf("%s is set but %s (the workspace whose roles it sets) is not", EnvOIDCRoleClaim, EnvOIDCWorkspace)
	case c.OIDC.RoleClaim != "" && c.OIDC.Issuer == "":
		return fmt.Errorf("%s is set but %s is not", EnvOIDCRoleClaim, EnvOIDCIssuer)
	}
	return nil
}

// claimRole is the role the configured claim maps to ("" when the claim
// is not configured); an error (refusing the sign-in) when it maps to none.
func (s *Service) claimRole(claims map[string]any) (platform.Role, error) {
	name := s.cfg.OIDC.RoleClaim
	if name == "" {
		return "", nil
	}
	var values []string
	switch v := claims[name].(type) {
	case string:
		values = []string{v}
	case []any:
		for _, x := range v {
			if s, ok := x.(string); ok {
				values = append(values, s)
			}
		}
	}
	var best platform.Role
	for _, v := range values {
		if r, ok := s.cfg.OIDC.RoleMap[v]; ok && (best == "" || r.AtLeast(best)) {
			best = r
		}
	}
	if best == "" {
		mapped := make([]string, 0, len(s.cfg.OIDC.RoleMap))
		for v := range s.cfg.OIDC.RoleMap {
			mapped = append(mapped, v)
		}
		sort.Strings(mapped)
		return "", platform.Forbidden("your %s claim %s (%s) holds none of the values this platform maps to a role (%s): the sign-in is refused; ask your %s administrator for one of them",
			s.cfg.OIDC.Name, name, strings.Join(values, ", "), strings.Join(mapped, ", "), s.cfg.OIDC.Name)
	}
	return best, nil
}

// applyRole sets an account's role in the configured workspace, adding
// its membership if missing; an owner is left as it is.
func (s *Service) applyRole(ctx context.Context, accountID string, role platform.Role, address string) error {
	ws, err := s.signUpWorkspace(ctx)
	if err != nil {
		return err
	}
	m, ok, err := s.store.GetMember(ctx, ws, accountID)
	if err != nil {
		return err
	}
	acct, err := s.store.GetAccount(ctx, accountID)
	if err != nil {
		return err
	}
	detail := ""
	switch {
	case !ok:
		if _, err := s.store.AddMember(ctx, ws, acct, role); err != nil {
			return err
		}
		detail = fmt.Sprintf("joined workspace %s as %s from the %s claim", ws, role, s.cfg.OIDC.RoleClaim)
	case m.Role == platform.RoleOwner || m.Role == role:
		return nil
	default:
		if _, err := s.store.SetMemberRole(ctx, m, role); err != nil {
			return err
		}
		detail = fmt.Sprintf("role %s -> %s from the %s claim", m.Role, role, s.cfg.OIDC.RoleClaim)
	}
	s.audit(ctx, Event{AccountID: accountID, Email: acct.Email, Action: "ROLE_SET", Detail: detail, Address: address})
	return nil
}
