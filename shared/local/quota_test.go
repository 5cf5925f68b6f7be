package local_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/local"
)

// The operator's quotas come from BP_QUOTA_*: valid values reach the
// store, an invalid one stops the platform at its start.
func TestQuotasFromEnvironment(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	t.Setenv("BP_QUOTA_MESSAGES_PER_MONTH", "12")
	t.Setenv("BP_QUOTA_STORAGE_BYTES", "1000")
	p, err := local.Open(context.Background(), t.TempDir(), "", log)
	if err != nil {
		t.Fatal(err)
	}
	got := p.Store.Limits()
	p.Close()
	if want := (dynamo.Limits{MessagesPerMonth: 12, StorageBytes: 1000}); got != want {
		t.Fatalf("limits %+v, want %+v", got, want)
	}
	for _, bad := range []string{"-1", "ten", "1.5"} {
		t.Setenv("BP_QUOTA_EVENTS_PER_MONTH", bad)
		p, err := local.Open(context.Background(), t.TempDir(), "", log)
		if err == nil {
			p.Close()
			t.Fatalf("BP_QUOTA_EVENTS_PER_MONTH=%s accepted", bad)
		}
		if !strings.Contains(err.Error(), "BP_QUOTA_EVENTS_PER_MONTH") {
			t.Fatalf("error does not name the variable: %v", err)
		}
	}
}
