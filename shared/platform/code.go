package platform

import "context"

// CodeRunner runs deployed code: bots and integration versions that were
// deployed with code (bp deploy) and have no url. It answers the address
// at which the code takes the SDK's calls, starting it when needed.
// Locally it is the worker manager (shared/worker: one Node.js process per
// bot and per integration version); on AWS it is shared/lambdarunner (one
// Lambda function per bot and per integration version).
type CodeRunner interface {
	BotURL(ctx context.Context, b Bot) (string, error)
	IntegrationURL(ctx context.Context, i Integration) (string, error)
}

// CodeDeployer is a CodeRunner that must be told when deployed code, its
// secrets or its owner change (AWS: the functions are made ahead of the
// calls; the local workers need not be told). apiURL is the platform's
// base URL as the code reaches it (BP_API_URL). Deploy* are idempotent:
// deploying what runs already does nothing.
type CodeDeployer interface {
	DeployBot(ctx context.Context, b Bot, apiURL string) error
	DeployIntegration(ctx context.Context, i Integration, apiURL string) error
	RemoveBot(ctx context.Context, botID string) error
	RemoveIntegration(ctx context.Context, integrationID string) error
}

// HasCode reports whether the bot has deployed code (run by the platform
// when it has no url).
func (b Bot) HasCode() bool { return b.CodeKey != "" || b.Code != "" }

// HasCode reports whether the integration version has deployed code.
func (i Integration) HasCode() bool { return i.CodeKey != "" }

// errNoRunner is why deployed code is not called where nothing runs it.
var errNoRunner = Errorf(ErrBadGateway, "deployed code cannot run on this deployment yet (no code runner: give the bot or integration a url)")

// BotTarget is the address a call to the bot goes to: its url, or else
// its deployed code's, run by r. "" when it has neither: the caller says
// so in its own words.
func BotTarget(ctx context.Context, r CodeRunner, b Bot) (string, error) {
	if b.URL != "" || !b.HasCode() {
		return b.URL, nil
	}
	if r == nil {
		return "", errNoRunner
	}
	return r.BotURL(ctx, b)
}

// IntegrationTarget is BotTarget for an integration version.
func IntegrationTarget(ctx context.Context, r CodeRunner, i Integration) (string, error) {
	if i.URL != "" || !i.HasCode() {
		return i.URL, nil
	}
	if r == nil {
		return "", errNoRunner
	}
	return r.IntegrationURL(ctx, i)
}
