package dynamo

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"math/big"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/authcache"
	"github.com/botforge/platform/shared/platform"
)

func accountPK(id string) string            { return "ACCOUNT#" + id }
func emailPK(email string) string           { return "EMAIL#" + email }
func tokenPK(hash string) string            { return "TOKEN#" + hash }
func accountWorkspacesGSI(id string) string { return "ACCOUNT#" + id + "#WS" }

const (
	skAccount = "ACCOUNT"
	skEmail   = "EMAIL"
	skToken   = "TOKEN"
)

// NormalizeEmail is the form an email is stored and matched in.
func NormalizeEmail(email string) string { return strings.ToLower(strings.TrimSpace(email)) }

// GetAccount reads an account by id (one GetItem).
func (s *Store) GetAccount(ctx context.Context, id string) (platform.Account, error) {
	var a platform.Account
	it, err := s.get(ctx, accountPK(id), skAccount)
	if err != nil {
		return a, err
	}
	if it == nil {
		return a, platform.NotFound("account", id)
	}
	return a, decodeDoc(it, &a)
}

// AccountByEmail finds the account of an email (two GetItems).
func (s *Store) AccountByEmail(ctx context.Context, email string) (platform.Account, bool, error) {
	it, err := s.get(ctx, emailPK(NormalizeEmail(email)), skEmail)
	if err != nil || it == nil {
		return platform.Account{}, false, err
	}
	a, err := s.GetAccount(ctx, getS(it, "accountId"))
	return a, err == nil, err
}

// EnsureAccount returns the account of email, creating it when there is none.
// created tells whether this call created it. Concurrent calls for one email
// create one account: the email item is written with the account, under a
// condition.
func (s *Store) EnsureAccount(ctx context.Context, email string) (acct platform.Account, created bool, err error) {
	email = NormalizeEmail(email)
	for attempt := 0; attempt < 3; attempt++ {
		a, ok, err := s.AccountByEmail(ctx, email)
		if err != nil || ok {
			return a, false, err
		}
		a = platform.Account{ID: platform.NewAccountID(), Email: email, CreatedAt: platform.Now()}
		items, err := accountWrites(a)
		if err != nil {
			return a, false, err
		}
		err = s.transact(ctx, items, func(int) error { return errRetry })
		if err == errRetry {
			continue // someone else created it: read theirs
		}
		return a, err == nil, err
	}
	return platform.Account{}, false, platform.Errorf(platform.ErrResourceLocked, "account %q is being created concurrently, retry", email)
}

// accountWrites create account a and claim its email (both conditional on
// absence, in this order).
func accountWrites(a platform.Account) ([]types.TransactWriteItem, error) {
	acctItem, err := docItem(accountPK(a.ID), skAccount, a)
	if err != nil {
		return nil, err
	}
	emailItem := key(emailPK(a.Email), skEmail)
	emailItem["accountId"] = str(a.ID)
	return []types.TransactWriteItem{putNew(acctItem), putNew(emailItem)}, nil
}

var errRetry = platform.Errorf(platform.ErrResourceLocked, "conflict, retry")

// newTokenValue returns a fresh random token (190 bits) and the hash it is stored under.
func newTokenValue(prefix string) (value, hash string) {
	const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	var b strings.Builder
	b.WriteString(prefix)
	for i := 0; i < 32; i++ {
		n, err := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		if err != nil {
			panic(err)
		}
		b.WriteByte(alphabet[n.Int64()])
	}
	value = b.String()
	return value, HashToken(value)
}

// HashToken is how a token is stored: tokens are long random strings, so a
// plain SHA-256 is enough to make a leaked table useless for authentication.
func HashToken(value string) string {
	sum := sha256.Sum256([]byte(value))
	return hex.EncodeToString(sum[:])
}

func tokenItem(hash string, p platform.Principal) item {
	it := key(tokenPK(hash), skToken)
	it["kind"] = str(string(p.Kind))
	it["tokenId"] = str(p.TokenID)
	if p.AccountID != "" {
		it["accountId"] = str(p.AccountID)
	}
	if p.BotID != "" {
		it["botId"] = str(p.BotID)
		it["workspaceId"] = str(p.WorkspaceID)
	}
	if p.IntegrationID != "" {
		it["integrationId"] = str(p.IntegrationID)
		it["workspaceId"] = str(p.WorkspaceID)
	}
	return it
}

// Authenticate resolves a bearer token to its principal: one strongly
// consistent GetItem, remembered for authcache.TTL in this process, so a
// token deleted in this process stops working at once and one deleted
// elsewhere within authcache.TTL (docs/security.md).
func (s *Store) Authenticate(ctx context.Context, token string) (platform.Principal, bool, error) {
	hash := HashToken(token)
	return s.tokens.Get(ctx, hash, func(ctx context.Context) (platform.Principal, bool, error) { return s.readToken(ctx, hash) })
}

// TokenCache is the store's cache of tokens (tests).
func (s *Store) TokenCache() *authcache.Cache[platform.Principal] { return s.tokens }

// readToken reads a token's lookup item (strongly consistent).
func (s *Store) readToken(ctx context.Context, hash string) (platform.Principal, bool, error) {
	it, err := s.get(ctx, tokenPK(hash), skToken)
	if err != nil || it == nil {
		return platform.Principal{}, false, err
	}
	return platform.Principal{
		Kind:        platform.PrincipalKind(getS(it, "kind")),
		TokenID:     getS(it, "tokenId"),
		AccountID:   getS(it, "accountId"),
		BotID:       getS(it, "botId"),
		WorkspaceID: getS(it, "workspaceId"),
		// Integration API keys (bp_iak_).
		IntegrationID: getS(it, "integrationId"),
	}, true, nil
}

// CreatePAT creates a personal access token of an existing account.
func (s *Store) CreatePAT(ctx context.Context, accountID, note string) (platform.NewToken, error) {
	t, items, err := patWrites(accountID, note)
	if err != nil {
		return t, err
	}
	err = s.transact(ctx, append([]types.TransactWriteItem{mustExist(accountPK(accountID), skAccount)}, items...),
		func(int) error { return platform.NotFound("account", accountID) })
	return t, err
}

// patWrites create a new personal access token of an account: its
// metadata item and its lookup item.
func patWrites(accountID, note string) (platform.NewToken, []types.TransactWriteItem, error) {
	value, hash := newTokenValue("bp_pat_")
	t := platform.NewToken{TokenInfo: platform.TokenInfo{ID: platform.NewID(platform.PrefixPAT), CreatedAt: platform.Now(), Note: note}, Value: value}
	meta, err := docItem(accountPK(accountID), "PAT#"+t.ID, t.TokenInfo)
	if err != nil {
		return t, nil, err
	}
	meta["hash"] = str(hash)
	tok := tokenItem(hash, platform.Principal{Kind: platform.PrincipalAccount, TokenID: t.ID, AccountID: accountID})
	return t, []types.TransactWriteItem{putNew(meta), putNew(tok)}, nil
}

// ListPATs lists an account's personal access tokens (one Query).
func (s *Store) ListPATs(ctx context.Context, accountID string) ([]platform.TokenInfo, error) {
	return queryAllDocs[platform.TokenInfo](ctx, s, &dynamodb.QueryInput{
		KeyConditionExpression: aws.String("pk = :pk AND begins_with(sk, :p)"),
		ExpressionAttributeValues: item{
			":pk": str(accountPK(accountID)), ":p": str("PAT#"),
		},
		ConsistentRead: aws.Bool(true),
	})
}

// DeletePAT deletes a token of the account; its value stops authenticating
// in the same transaction.
func (s *Store) DeletePAT(ctx context.Context, accountID, patID string) error {
	it, err := s.get(ctx, accountPK(accountID), "PAT#"+patID)
	if err != nil {
		return err
	}
	if it == nil {
		return platform.NotFound("personal access token", patID)
	}
	return s.deleteWithToken(ctx, key(accountPK(accountID), "PAT#"+patID), getS(it, "hash"), "personal access token", patID)
}

// deleteWithToken deletes a token's metadata item and its lookup item together.
func (s *Store) deleteWithToken(ctx context.Context, meta item, hash, kind, id string) error {
	defer s.tokens.Forget(hash)
	return s.transact(ctx, []types.TransactWriteItem{
		{Delete: &types.Delete{Key: meta, ConditionExpression: aws.String("attribute_exists(pk)")}},
		{Delete: &types.Delete{Key: key(tokenPK(hash), skToken)}},
	}, func(int) error { return platform.NotFound(kind, id) })
}
