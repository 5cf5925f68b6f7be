package httpapi_test

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/authcache"
	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/localdynamo"
)

// otherProcess is a second store over the platform's table, with a cache
// of its own: what another function (or Lambda instance) sees.
func otherProcess(e *apitest.Env) *dynamo.Store {
	return dynamo.New(dynamodb.New(e.Platform.Store.Client().Options()), e.Platform.Env.Table)
}

// waitRevoked polls auth until it no longer authenticates and answers
// when (after start, the deletion's answer) the last accepted check was
// made.
func waitRevoked(t *testing.T, start time.Time, auth func() bool) time.Duration {
	t.Helper()
	last := time.Duration(0)
	for {
		sent := time.Since(start)
		if !auth() {
			return last
		}
		last = sent
		if sent > 10*authcache.TTL {
			t.Fatalf("still authenticating after %s (bound %s)", sent, authcache.TTL)
		}
		time.Sleep(10 * time.Millisecond) // polling the state asserted, not synchronisation
	}
}

// TestTokenCheckIsCachedAndRevocationBounded: a busy bot API key is read
// from the table at most once per authcache.TTL (not on every call);
// deleting it stops it at once in the process that deleted it (the local
// platform is one process) and within authcache.TTL in another process's
// cache (docs/security.md). The same for a personal access token.
func TestTokenCheckIsCachedAndRevocationBounded(t *testing.T) {
	f := newFixture(t)
	f.Platform.Store.TokenCache().SetTTL(authcache.TTL) // apitest turns it off
	tok := f.AdminToken
	bot := f.createBot(tok, nil)
	created := f.Check(f.ws_(tok, "POST", "/v1/admin/bots/baks", map[string]any{"botId": bot}), 200, "createBotApiKey")
	key, keyID := created.Str("value"), created.Str("id")

	// Busy: 8 callers, 400 calls; the key's item is read about once per TTL.
	ddb := f.Platform.Dynamo
	ddb.CountUnits(true)
	defer ddb.CountUnits(false)
	start := time.Now()
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				if r := f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/bots/" + bot, Token: key}); r.Status != 200 {
					t.Errorf("getBot with the key: %d %s", r.Status, r.Raw)
					return
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	part := localdynamo.Partition{Table: f.Platform.Env.Table, Key: "TOKEN#" + dynamo.HashToken(key)}
	reads := ddb.Usage().Partitions[part].Read
	if max := math.Ceil(float64(took)/float64(authcache.TTL)) + 1; reads < 1 || reads > max {
		t.Fatalf("400 calls in %s read the token's item for %.1f units (want 1..%.0f: once per %s)", took, reads, max, authcache.TTL)
	}
	t.Logf("400 calls in %s: %.1f read units on the token's item", took, reads)

	other := otherProcess(f.Env)
	ctx := context.Background()
	if _, ok, err := other.Authenticate(ctx, key); !ok || err != nil {
		t.Fatalf("other process: %v %v", ok, err)
	}
	f.Check(f.ws_(tok, "DELETE", "/v1/admin/bots/baks/"+keyID, nil), 200, "deleteBotApiKey")
	deleted := time.Now()
	// This process: at once.
	if r := f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/bots/" + bot, Token: key}); r.Status != 401 {
		t.Fatalf("deleted key in the process that deleted it: %d %s", r.Status, r.Raw)
	}
	// Another process: within the TTL.
	if d := waitRevoked(t, deleted, func() bool { _, ok, _ := other.Authenticate(ctx, key); return ok }); d > authcache.TTL {
		t.Fatalf("deleted key worked %s in another process (bound %s)", d, authcache.TTL)
	}

	// A personal access token, deleted by its account.
	pat := f.Check(f.Do(apitest.Req{Method: "POST", Path: "/v1/admin/account/pats", Token: tok, Body: map[string]any{"note": "cached"}}), 200, "")
	patValue, patID := pat.Str("pat.value"), pat.Str("pat.id")
	if patValue == "" {
		patValue, patID = pat.Str("value"), pat.Str("id")
	}
	f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/account/me", Token: patValue}), 200, "")
	if _, ok, _ := other.Authenticate(ctx, patValue); !ok {
		t.Fatal("other process: the new token does not authenticate")
	}
	f.Check(f.Do(apitest.Req{Method: "DELETE", Path: "/v1/admin/account/pats/" + patID, Token: tok}), 200, "")
	deleted = time.Now()
	if r := f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/account/me", Token: patValue}); r.Status != 401 {
		t.Fatalf("deleted token in the process that deleted it: %d %s", r.Status, r.Raw)
	}
	if d := waitRevoked(t, deleted, func() bool { _, ok, _ := other.Authenticate(ctx, patValue); return ok }); d > authcache.TTL {
		t.Fatalf("deleted token worked %s in another process (bound %s)", d, authcache.TTL)
	}
}
