package worker

import (
	"context"
	"io"
	"time"

	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/platform"
)

// keyNote marks the API keys minted for workers, so a start finds and
// revokes those a crash left behind.
const keyNote = "deployed code (local worker)"

// StoreSource is the Source of the local platform: bundles from the file
// storage, a bot API key (bp_bak_) for a bot's code, an integration API
// key (bp_iak_) for an integration's: each acts only as its bot or for
// the bots that installed the integration, never as an account.
type StoreSource struct {
	Store *dynamo.Store
	Files platform.FileStorage
}

// Code reads a bundle.
func (s StoreSource) Code(ctx context.Context, key string) ([]byte, error) {
	rc, _, err := s.Files.Open(ctx, key, "")
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// BotToken mints a bot API key for the bot's worker, revoking the keys of
// its earlier workers first.
func (s StoreSource) BotToken(ctx context.Context, b platform.Bot) (string, func(), error) {
	if old, err := s.Store.ListBotAPIKeys(ctx, b.ID); err == nil {
		for _, k := range old {
			if k.Note == keyNote {
				_ = s.Store.DeleteBotAPIKey(ctx, b.WorkspaceID, k.ID)
			}
		}
	}
	t, err := s.Store.CreateBotAPIKey(ctx, b, keyNote)
	if err != nil {
		return "", nil, err
	}
	return t.Value, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Store.DeleteBotAPIKey(ctx, b.WorkspaceID, t.ID)
	}, nil
}

// IntegrationToken mints an integration API key for the version's worker.
func (s StoreSource) IntegrationToken(ctx context.Context, i platform.Integration) (string, func(), error) {
	if old, err := s.Store.ListIntegrationAPIKeys(ctx, i.ID); err == nil {
		for _, k := range old {
			if k.Note == keyNote {
				_ = s.Store.DeleteIntegrationAPIKey(ctx, i.WorkspaceID, k.ID)
			}
		}
	}
	t, err := s.Store.CreateIntegrationAPIKey(ctx, i, keyNote)
	if err != nil {
		return "", nil, err
	}
	return t.Value, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Store.DeleteIntegrationAPIKey(ctx, i.WorkspaceID, t.ID)
	}, nil
}
