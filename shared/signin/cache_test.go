package signin_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/authcache"
	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/signin"
)

// TestEndedSessionStopsWithinTheBound: a session is remembered by each
// process for authcache.TTL; signing out stops it at once in the process
// that ended it and within authcache.TTL in another process's cache
// (docs/security.md).
func TestEndedSessionStopsWithinTheBound(t *testing.T) {
	t.Setenv("PLATFORM_BUILTINS", "none")
	e := apitest.New(t)
	cookie, csrf := setupSession(t, e, "correct horse battery")
	hdr := map[string]string{"Cookie": signin.CookieName + "=" + cookie, signin.CSRFHeader: csrf}
	me := func() apitest.Response {
		return e.Do(apitest.Req{Method: "GET", Path: "/v1/admin/account/me", Headers: hdr})
	}
	e.Check(me(), 200, "")
	other := dynamo.New(dynamodb.New(e.Platform.Store.Client().Options()), e.Platform.Env.Table)
	ctx := context.Background()
	hash := dynamo.HashToken(cookie)
	if _, ok, err := other.SessionByHash(ctx, hash); !ok || err != nil {
		t.Fatalf("other process: %v %v", ok, err)
	}
	e.Check(e.Do(apitest.Req{Method: "POST", Path: "/auth/signout", Headers: hdr}), 200, "")
	if r := me(); r.Status != 401 {
		t.Fatalf("ended session in the process that ended it: %d %s", r.Status, r.Raw)
	}
	// The last check the other process accepted was made within the
	// bound after the sign-out's answer.
	start, last := time.Now(), time.Duration(0)
	for {
		sent := time.Since(start)
		_, ok, err := other.SessionByHash(ctx, hash)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		last = sent
		if sent > 10*authcache.TTL {
			t.Fatalf("ended session still found after %s", sent)
		}
		time.Sleep(10 * time.Millisecond) // polling the state asserted
	}
	if last > authcache.TTL {
		t.Fatalf("ended session accepted %s after its end in another process (bound %s)", last, authcache.TTL)
	}
}
