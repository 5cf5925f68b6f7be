package httpapi

import (
	"strings"

	"github.com/botforge/platform/shared/platform"
)

// Deployed code on a runner that must be told (platform.CodeDeployer: on
// AWS, one Lambda function per bot and per integration version, made by
// the admin function). The record is written first, then its function is
// deployed: a deployment that fails answers 502 saying so, the record
// stays, and deploying again (the same call) converges; calls made in
// between get a retryable answer (the function runs another version).

// apiBase is this API's origin as deployed code reaches it (BP_API_URL).
func apiBase(c *call) string { return strings.TrimSuffix(webhookBase(c), "/webhooks") }

func (s *server) deployer() platform.CodeDeployer {
	d, _ := s.Code.(platform.CodeDeployer)
	return d
}

// deployBot deploys the bot's code when it has code and no url.
func (s *server) deployBot(c *call, b platform.Bot) error {
	d := s.deployer()
	if d == nil || b.URL != "" || b.CodeKey == "" {
		return nil
	}
	if err := d.DeployBot(c.ctx, b, apiBase(c)); err != nil {
		s.Logger.Error("deploying a bot's code", "bot", b.ID, "err", err)
		return platform.Errorf(platform.ErrBadGateway, "the bot %q is saved but its code could not be deployed (%v): deploy it again", b.ID, err)
	}
	return nil
}

// deployIntegration deploys the integration version's code when it has
// code and no url.
func (s *server) deployIntegration(c *call, i platform.Integration) error {
	d := s.deployer()
	if d == nil || i.URL != "" || i.CodeKey == "" {
		return nil
	}
	if err := d.DeployIntegration(c.ctx, i, apiBase(c)); err != nil {
		s.Logger.Error("deploying an integration's code", "integration", i.ID, "err", err)
		return platform.Errorf(platform.ErrBadGateway, "the integration %q is saved but its code could not be deployed (%v): deploy it again", i.ID, err)
	}
	return nil
}

// removeCode removes the function of a deleted bot or integration (a
// failure is logged: the function, unreachable without its record, stays).
func (s *server) removeCode(c *call, kind, id string) {
	d := s.deployer()
	if d == nil {
		return
	}
	var err error
	if kind == "bot" {
		err = d.RemoveBot(c.ctx, id)
	} else {
		err = d.RemoveIntegration(c.ctx, id)
	}
	if err != nil {
		s.Logger.Error("removing deployed code", kind, id, "err", err)
	}
}
