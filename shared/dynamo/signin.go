package dynamo

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/platform"
)

// The items of people's sign-in (shared/signin, docs/signin.md): their
// credentials, their browser sessions, one-time links (first-account
// setup, invitations), identities at OpenID providers and the pending
// OpenID flows. Secrets are never stored: sessions, links and flows are
// keyed by the SHA-256 of their random value (HashToken), passwords are
// argon2id hashes, recovery codes SHA-256 hashes.

const (
	skSignIn      = "SIGNIN"
	skSession     = "SESSION"
	skLink        = "LINK"
	skFlow        = "FLOW"
	skIdentity    = "IDENTITY"
	sessionPrefix = "SESSION#"
	invitePrefix  = "INVITE#"
	identityPref  = "IDENTITY#"
	linkPrefix    = "LINK#"
)

func sessionPK(hash string) string { return "SESSION#" + hash }
func linkPK(hash string) string    { return "SIGNINLINK#" + hash }
func flowPK(hash string) string    { return "OIDCFLOW#" + hash }
func identityPK(iss, sub string) string {
	return "OIDCID#" + strconv.Itoa(len(iss)) + "#" + iss + "#" + sub
}

// Credentials are an account's password and second factor.
type Credentials struct {
	PasswordHash   string   `json:"passwordHash,omitempty"`
	PasswordSetAt  string   `json:"passwordSetAt,omitempty"`
	TOTPSecret     string   `json:"totpSecret,omitempty"`
	TOTPEnabled    bool     `json:"totpEnabled,omitempty"`
	TOTPLastStep   int64    `json:"totpLastStep,omitempty"`
	RecoveryHashes []string `json:"recoveryHashes,omitempty"`
}

// GetCredentials reads an account's credentials and their version (0:
// none yet). One GetItem.
func (s *Store) GetCredentials(ctx context.Context, accountID string) (Credentials, int64, error) {
	var c Credentials
	it, err := s.get(ctx, accountPK(accountID), skSignIn)
	if err != nil || it == nil {
		return c, 0, err
	}
	return c, getN(it, attrVer), decodeDoc(it, &c)
}

// ErrChanged is a conditional write that lost to a concurrent one.
var ErrChanged = platform.Errorf(platform.ErrResourceLocked, "changed concurrently, retry")

// PutCredentials writes an account's credentials if their version is
// still ver (0: none written yet) and the account exists.
func (s *Store) PutCredentials(ctx context.Context, accountID string, c Credentials, ver int64) error {
	var w types.TransactWriteItem
	if ver == 0 {
		it, err := docItem(accountPK(accountID), skSignIn, c)
		if err != nil {
			return err
		}
		w = putNew(it)
	} else {
		var err error
		if w, err = replaceDoc(accountPK(accountID), skSignIn, c, ver, nil); err != nil {
			return err
		}
	}
	return s.transact(ctx, []types.TransactWriteItem{mustExist(accountPK(accountID), skAccount), w}, func(i int) error {
		if i == 0 {
			return platform.NotFound("account", accountID)
		}
		return ErrChanged
	})
}

// Session is a browser session of an account (its value is never stored).
type Session struct {
	ID         string `json:"id"`
	AccountID  string `json:"accountId"`
	CreatedAt  string `json:"createdAt"`
	LastSeenAt string `json:"lastSeenAt"`
	// ExpiresAt is the absolute end; the idle end is LastSeenAt plus the
	// idle timeout.
	ExpiresAt string `json:"expiresAt"`
	Method    string `json:"method"` // password, oidc, setup, invitation
	UserAgent string `json:"userAgent,omitempty"`
	Address   string `json:"address,omitempty"`
	Hash      string `json:"-"`
}

func sessionTTL(exp string) types.AttributeValue {
	t, err := time.Parse(time.RFC3339Nano, exp)
	if err != nil {
		t = time.Now().Add(30 * 24 * time.Hour)
	}
	return num(t.Add(time.Hour).Unix())
}

// CreateSession stores a session under hash: its lookup item and the
// account's list item, in one transaction.
func (s *Store) CreateSession(ctx context.Context, ss Session) error {
	look, err := docItem(sessionPK(ss.Hash), skSession, ss)
	if err != nil {
		return err
	}
	look[attrTTL] = sessionTTL(ss.ExpiresAt)
	list, err := docItem(accountPK(ss.AccountID), sessionPrefix+ss.ID, ss)
	if err != nil {
		return err
	}
	list["hash"] = str(ss.Hash)
	list[attrTTL] = sessionTTL(ss.ExpiresAt)
	return s.transact(ctx, []types.TransactWriteItem{mustExist(accountPK(ss.AccountID), skAccount), putNew(look), putNew(list)},
		func(i int) error {
			if i == 0 {
				return platform.NotFound("account", ss.AccountID)
			}
			return ErrChanged
		})
}

// SessionByHash reads a session by the hash of its value: one strongly
// consistent GetItem, remembered for authcache.TTL in this process, so a
// session ended in this process stops working at once and one ended
// elsewhere within authcache.TTL (docs/security.md).
func (s *Store) SessionByHash(ctx context.Context, hash string) (Session, bool, error) {
	return s.sessions.Get(ctx, hash, func(ctx context.Context) (Session, bool, error) { return s.readSession(ctx, hash) })
}

// ForgetSession drops what this process remembers of a session (to read
// it afresh before deciding it timed out).
func (s *Store) ForgetSession(hash string) { s.sessions.Forget(hash) }

func (s *Store) readSession(ctx context.Context, hash string) (Session, bool, error) {
	var ss Session
	it, err := s.get(ctx, sessionPK(hash), skSession)
	if err != nil || it == nil {
		return ss, false, err
	}
	err = decodeDoc(it, &ss)
	ss.Hash = hash
	return ss, err == nil, err
}

// TouchSession records a session's last use (both items; a session ended
// meanwhile is not recreated).
func (s *Store) TouchSession(ctx context.Context, ss Session) error {
	s.sessions.Set(ss.Hash, ss)
	for _, k := range []item{key(sessionPK(ss.Hash), skSession), key(accountPK(ss.AccountID), sessionPrefix+ss.ID)} {
		it := k
		doc, err := docItem("", "", ss)
		if err != nil {
			return err
		}
		_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &s.table, Key: it,
			UpdateExpression:          aws.String("SET #doc = :doc"),
			ConditionExpression:       aws.String("attribute_exists(pk)"),
			ExpressionAttributeNames:  map[string]string{"#doc": attrDoc},
			ExpressionAttributeValues: item{":doc": doc[attrDoc]}})
		var cf *types.ConditionalCheckFailedException
		if err != nil && !errors.As(err, &cf) {
			return err
		}
	}
	return nil
}

// ListSessions lists an account's sessions (one Query).
func (s *Store) ListSessions(ctx context.Context, accountID string) ([]Session, error) {
	items, err := queryAllItems(ctx, s, &dynamodb.QueryInput{
		KeyConditionExpression:    aws.String("pk = :pk AND begins_with(sk, :p)"),
		ExpressionAttributeValues: item{":pk": str(accountPK(accountID)), ":p": str(sessionPrefix)},
		ConsistentRead:            aws.Bool(true),
	})
	if err != nil {
		return nil, err
	}
	out := make([]Session, 0, len(items))
	for _, it := range items {
		var ss Session
		if err := decodeDoc(it, &ss); err != nil {
			return nil, err
		}
		ss.Hash = getS(it, "hash")
		out = append(out, ss)
	}
	return out, nil
}

// DeleteSession ends one session of an account (both items).
func (s *Store) DeleteSession(ctx context.Context, accountID, sessionID string) error {
	it, err := s.get(ctx, accountPK(accountID), sessionPrefix+sessionID)
	if err != nil {
		return err
	}
	if it == nil {
		return platform.NotFound("session", sessionID)
	}
	defer s.sessions.Forget(getS(it, "hash"))
	return s.batchDelete(ctx, []item{key(sessionPK(getS(it, "hash")), skSession), key(accountPK(accountID), sessionPrefix+sessionID)})
}

// DeleteSessions ends every session of an account; it answers how many.
func (s *Store) DeleteSessions(ctx context.Context, accountID string) (int, error) {
	all, err := s.ListSessions(ctx, accountID)
	if err != nil || len(all) == 0 {
		return 0, err
	}
	keys := make([]item, 0, 2*len(all))
	for _, ss := range all {
		defer s.sessions.Forget(ss.Hash)
		keys = append(keys, key(sessionPK(ss.Hash), skSession), key(accountPK(accountID), sessionPrefix+ss.ID))
	}
	return len(all), s.batchDelete(ctx, keys)
}

// Link is a one-time sign-in link: the first account's setup, or an
// invitation to a workspace.
type Link struct {
	ID          string `json:"id"`
	Kind        string `json:"kind"` // setup, invitation
	AccountID   string `json:"accountId"`
	Email       string `json:"email"`
	WorkspaceID string `json:"workspaceId,omitempty"`
	Role        string `json:"role,omitempty"`
	InvitedBy   string `json:"invitedBy,omitempty"`
	CreatedAt   string `json:"createdAt"`
	ExpiresAt   string `json:"expiresAt"`
	Hash        string `json:"-"`
}

// CreateLink stores a link under hash; an invitation is listed in its
// workspace too.
func (s *Store) CreateLink(ctx context.Context, l Link) error {
	it, err := docItem(linkPK(l.Hash), skLink, l)
	if err != nil {
		return err
	}
	it[attrTTL] = sessionTTL(l.ExpiresAt)
	ws := []types.TransactWriteItem{putNew(it)}
	if l.WorkspaceID != "" {
		inv, err := docItem(workspacePK(l.WorkspaceID), invitePrefix+l.ID, l)
		if err != nil {
			return err
		}
		inv["hash"] = str(l.Hash)
		inv[attrTTL] = sessionTTL(l.ExpiresAt)
		ws = append(ws, putNew(inv))
	}
	// The account's own index of its links: its deletion finds them.
	own := key(accountPK(l.AccountID), linkPrefix+l.ID)
	own["hash"] = str(l.Hash)
	own["workspaceId"] = str(l.WorkspaceID)
	own[attrTTL] = sessionTTL(l.ExpiresAt)
	ws = append(ws, putNew(own))
	return s.transact(ctx, ws, func(int) error { return ErrChanged })
}

// deleteLinkItems deletes a link's items: its lookup, its workspace's
// listing, its account's index.
func (s *Store) deleteLinkItems(ctx context.Context, l Link) error {
	keys := []item{key(linkPK(l.Hash), skLink), key(accountPK(l.AccountID), linkPrefix+l.ID)}
	if l.WorkspaceID != "" {
		keys = append(keys, key(workspacePK(l.WorkspaceID), invitePrefix+l.ID))
	}
	return s.batchDelete(ctx, keys)
}

// DeleteSignIn deletes what the sign-in keeps of an account outside its
// own partition (its deletion): sessions, links, identity lookups.
func (s *Store) DeleteSignIn(ctx context.Context, accountID string) error {
	if _, err := s.DeleteSessions(ctx, accountID); err != nil {
		return err
	}
	links, err := queryAllItems(ctx, s, &dynamodb.QueryInput{
		KeyConditionExpression:    aws.String("pk = :pk AND begins_with(sk, :p)"),
		ExpressionAttributeValues: item{":pk": str(accountPK(accountID)), ":p": str(linkPrefix)},
		ConsistentRead:            aws.Bool(true),
	})
	if err != nil {
		return err
	}
	for _, it := range links {
		l := Link{ID: getS(it, attrSK)[len(linkPrefix):], AccountID: accountID, WorkspaceID: getS(it, "workspaceId"), Hash: getS(it, "hash")}
		if err := s.deleteLinkItems(ctx, l); err != nil {
			return err
		}
	}
	ids, err := s.ListIdentities(ctx, accountID)
	if err != nil {
		return err
	}
	var keys []item
	for _, id := range ids {
		keys = append(keys, key(identityPK(id.Issuer, id.Subject), skIdentity), key(accountPK(accountID), identityPref+identityPK(id.Issuer, id.Subject)))
	}
	if len(keys) == 0 {
		return nil
	}
	return s.batchDelete(ctx, keys)
}

// GetLink reads a link by the hash of its value.
func (s *Store) GetLink(ctx context.Context, hash string) (Link, bool, error) {
	var l Link
	it, err := s.get(ctx, linkPK(hash), skLink)
	if err != nil || it == nil {
		return l, false, err
	}
	l.Hash = hash
	return l, true, decodeDoc(it, &l)
}

// ConsumeLink deletes a link, once: of two concurrent uses one wins
// (found true), the other finds nothing.
func (s *Store) ConsumeLink(ctx context.Context, hash string) (Link, bool, error) {
	l, found, err := consumeDoc[Link](ctx, s, linkPK(hash), skLink)
	if err != nil || !found {
		return l, found, err
	}
	l.Hash = hash
	return l, true, s.deleteLinkItems(ctx, l)
}

// consumeDoc deletes an item if it exists and answers its doc.
func consumeDoc[T any](ctx context.Context, s *Store, pk, sk string) (T, bool, error) {
	var v T
	out, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &s.table, Key: key(pk, sk),
		ConditionExpression: aws.String("attribute_exists(pk)"), ReturnValues: types.ReturnValueAllOld})
	var cf *types.ConditionalCheckFailedException
	if errors.As(err, &cf) {
		return v, false, nil
	}
	if err != nil {
		return v, false, err
	}
	return v, true, decodeDoc(out.Attributes, &v)
}

// ListInvitations lists a workspace's pending invitations (one Query).
func (s *Store) ListInvitations(ctx context.Context, ws string) ([]Link, error) {
	items, err := queryAllItems(ctx, s, &dynamodb.QueryInput{
		KeyConditionExpression:    aws.String("pk = :pk AND begins_with(sk, :p)"),
		ExpressionAttributeValues: item{":pk": str(workspacePK(ws)), ":p": str(invitePrefix)},
		ConsistentRead:            aws.Bool(true),
	})
	if err != nil {
		return nil, err
	}
	out := make([]Link, 0, len(items))
	for _, it := range items {
		var l Link
		if err := decodeDoc(it, &l); err != nil {
			return nil, err
		}
		l.Hash = getS(it, "hash")
		out = append(out, l)
	}
	return out, nil
}

// DeleteInvitation revokes a pending invitation of a workspace.
func (s *Store) DeleteInvitation(ctx context.Context, ws, id string) error {
	it, err := s.get(ctx, workspacePK(ws), invitePrefix+id)
	if err != nil {
		return err
	}
	if it == nil {
		return platform.NotFound("invitation", id)
	}
	var l Link
	if err := decodeDoc(it, &l); err != nil {
		return err
	}
	l.Hash = getS(it, "hash")
	return s.deleteLinkItems(ctx, l)
}

// Flow is a pending OpenID Connect sign-in, keyed by the hash of its state.
type Flow struct {
	Provider  string `json:"provider"`
	Verifier  string `json:"verifier"`
	Nonce     string `json:"nonce"`
	LinkHash  string `json:"linkHash,omitempty"` // a setup or invitation being accepted
	ExpiresAt string `json:"expiresAt"`
}

// PutFlow stores a pending flow.
func (s *Store) PutFlow(ctx context.Context, stateHash string, f Flow) error {
	it, err := docItem(flowPK(stateHash), skFlow, f)
	if err != nil {
		return err
	}
	it[attrTTL] = sessionTTL(f.ExpiresAt)
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.table, Item: it, ConditionExpression: aws.String("attribute_not_exists(pk)")})
	return err
}

// ConsumeFlow takes a pending flow, once.
func (s *Store) ConsumeFlow(ctx context.Context, stateHash string) (Flow, bool, error) {
	return consumeDoc[Flow](ctx, s, flowPK(stateHash), skFlow)
}

// Identity is an account's identity at an OpenID provider.
type Identity struct {
	Issuer    string `json:"iss"`
	Subject   string `json:"sub"`
	AccountID string `json:"accountId"`
	Email     string `json:"email,omitempty"`
	LinkedAt  string `json:"linkedAt"`
}

// IdentityAccount finds the account linked to (iss, sub).
func (s *Store) IdentityAccount(ctx context.Context, iss, sub string) (Identity, bool, error) {
	var id Identity
	it, err := s.get(ctx, identityPK(iss, sub), skIdentity)
	if err != nil || it == nil {
		return id, false, err
	}
	return id, true, decodeDoc(it, &id)
}

// LinkIdentity links (iss, sub) to an account; an identity already linked
// is AlreadyExists.
func (s *Store) LinkIdentity(ctx context.Context, id Identity) error {
	look, err := docItem(identityPK(id.Issuer, id.Subject), skIdentity, id)
	if err != nil {
		return err
	}
	list, err := docItem(accountPK(id.AccountID), identityPref+identityPK(id.Issuer, id.Subject), id)
	if err != nil {
		return err
	}
	return s.transact(ctx, []types.TransactWriteItem{mustExist(accountPK(id.AccountID), skAccount), putNew(look), putNew(list)}, func(i int) error {
		if i == 0 {
			return platform.NotFound("account", id.AccountID)
		}
		return platform.Errorf(platform.ErrAlreadyExists, "this identity is already linked to an account")
	})
}

// ListIdentities lists an account's linked identities (one Query).
func (s *Store) ListIdentities(ctx context.Context, accountID string) ([]Identity, error) {
	return queryAllDocs[Identity](ctx, s, &dynamodb.QueryInput{
		KeyConditionExpression:    aws.String("pk = :pk AND begins_with(sk, :p)"),
		ExpressionAttributeValues: item{":pk": str(accountPK(accountID)), ":p": str(identityPref)},
		ConsistentRead:            aws.Bool(true),
	})
}

// AccountWorkspaceIDs lists the ids of the workspaces an account is a
// member of (one Query on GSI1), e.g. to audit its sign-ins in each.
func (s *Store) AccountWorkspaceIDs(ctx context.Context, accountID string) ([]string, error) {
	items, err := queryAllItems(ctx, s, &dynamodb.QueryInput{
		IndexName:                 aws.String(GSI1),
		KeyConditionExpression:    aws.String("gsi1pk = :pk"),
		ExpressionAttributeValues: item{":pk": str(accountWorkspacesGSI(accountID))},
	})
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(items))
	for _, it := range items {
		out = append(out, getS(it, attrPK)[len("WS#"):])
	}
	return out, nil
}
