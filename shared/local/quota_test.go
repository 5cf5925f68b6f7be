package local_test

import (
	"context"
	"fmt"
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

// TestStartBelowDiskReserveSaysWhatIsNeeded: a platform started with less
// free space than its disk reserve (set by the option behind the
// -disk-reserve-mib flag, or by the environment variable) refuses to start
// with a message giving the free space, the reserve and both ways to change
// it; a reserve of 0 keeps none and the platform starts.
func TestStartBelowDiskReserveSaysWhatIsNeeded(t *testing.T) {
	huge := int64(1 << 40) // 1 EiB in MiB: more than any disk has free
	run := func(o local.Options) error {
		o.Addr, o.DataDir = "127.0.0.1:0", t.TempDir()
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		ctx, cancel := context.WithCancel(context.Background())
		o.Ready = func(string) { cancel() }
		return local.Run(ctx, o)
	}
	for _, tc := range []struct {
		name string
		env  string
		opt  *int64
	}{{"flag", "", &huge}, {"environment", fmt.Sprint(huge), nil}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(local.DiskReserveEnv, tc.env)
			err := run(local.Options{DiskReserveMiB: tc.opt})
			if err == nil {
				t.Fatal("started below the reserve")
			}
			for _, want := range []string{"MiB free", "1099511627776 MiB it keeps in reserve", "-disk-reserve-mib", local.DiskReserveEnv} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%q does not say %q", err, want)
				}
			}
		})
	}
	t.Run("no reserve", func(t *testing.T) {
		t.Setenv(local.DiskReserveEnv, "0")
		if err := run(local.Options{}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("bad variable", func(t *testing.T) {
		t.Setenv(local.DiskReserveEnv, "lots")
		if err := run(local.Options{}); err == nil || !strings.Contains(err.Error(), local.DiskReserveEnv) {
			t.Fatalf("%v; want the variable named", err)
		}
	})
}
