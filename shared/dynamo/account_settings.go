package dynamo

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/platform"
)

// Account and workspace settings: the account's profile, preferences of an
// account or a workspace (one item each, under the owner's partition, sk
// PREF#<key>), public workspaces (gsi2 WS#PUBLIC) and account deletion.

const (
	skPref = "PREF#"
	// publicWorkspacesGSI is the gsi2 partition of the workspaces marked
	// public, in creation order.
	publicWorkspacesGSI = "WS#PUBLIC"
	attrPrefValue       = "value"
	attrPublicName      = "pubName" // lower-cased name, for listPublicWorkspaces' search
)

// AccountPatch holds the fields of an updateAccount call; nil means unchanged.
type AccountPatch struct {
	DisplayName    *string
	ProfilePicture *string
}

// UpdateAccount applies a patch to the account, conditional on the version
// read (a concurrent update is retried, never lost).
func (s *Store) UpdateAccount(ctx context.Context, id string, p AccountPatch) (platform.Account, error) {
	var out platform.Account
	err := optimistic(ctx, fmt.Sprintf("account %q", id), func() error {
		it, err := s.get(ctx, accountPK(id), skAccount)
		if err != nil {
			return err
		}
		if it == nil {
			return platform.NotFound("account", id)
		}
		var a platform.Account
		if err := decodeDoc(it, &a); err != nil {
			return err
		}
		if p.DisplayName != nil {
			a.DisplayName = *p.DisplayName
		}
		if p.ProfilePicture != nil {
			a.ProfilePicture = *p.ProfilePicture
		}
		upd, err := replaceDoc(accountPK(id), skAccount, a, getN(it, attrVer), nil)
		if err != nil {
			return err
		}
		out = a
		return s.transact(ctx, []types.TransactWriteItem{upd}, func(int) error { return errRetry })
	})
	return out, err
}

// PreferenceOwner names whose preference it is: an account or a workspace.
type PreferenceOwner struct {
	AccountID   string
	WorkspaceID string
}

func (o PreferenceOwner) key() (pk, sk, kind, id string) {
	if o.WorkspaceID != "" {
		return workspacePK(o.WorkspaceID), skWorkspace, "workspace", o.WorkspaceID
	}
	return accountPK(o.AccountID), skAccount, "account", o.AccountID
}

// SetPreference stores value (JSON) under key, replacing what was there,
// in one transaction with a check that the owner still exists.
func (s *Store) SetPreference(ctx context.Context, o PreferenceOwner, prefKey string, value json.RawMessage) error {
	pk, sk, kind, id := o.key()
	it := key(pk, skPref+prefKey)
	it[attrPrefValue] = str(string(value))
	return s.transact(ctx, []types.TransactWriteItem{
		mustExist(pk, sk),
		{Put: &types.Put{Item: it}},
	}, func(int) error { return platform.NotFound(kind, id) })
}

// GetPreference reads a preference (one GetItem); found is false when it
// was never set.
func (s *Store) GetPreference(ctx context.Context, o PreferenceOwner, prefKey string) (value json.RawMessage, found bool, err error) {
	pk, _, _, _ := o.key()
	it, err := s.get(ctx, pk, skPref+prefKey)
	if err != nil || it == nil {
		return nil, false, err
	}
	return json.RawMessage(getS(it, attrPrefValue)), true, nil
}

// publicWorkspaceIndex is what UpdateWorkspace writes beside a workspace's
// doc so that listPublicWorkspaces reads one index range: a public
// workspace is in gsi2 WS#PUBLIC; one made private moves to a partition
// of its own, which no list reads (an update can SET, not REMOVE, here).
func publicWorkspaceIndex(w platform.Workspace) map[string]types.AttributeValue {
	pk := publicWorkspacesGSI
	if !w.IsPublic {
		pk = "WS#PRIVATE#" + w.ID
	}
	return map[string]types.AttributeValue{
		attrGSI2PK:     str(pk),
		attrGSI2SK:     str(w.CreatedAt + "#" + w.ID),
		attrPublicName: str(strings.ToLower(w.Name)),
	}
}

// PublicWorkspacesPage lists public workspaces in creation order, one
// Query on gsi2 (O(page)); search keeps those whose name contains it
// (case-insensitive), a filter on the same range.
func (s *Store) PublicWorkspacesPage(ctx context.Context, search string, p Page) ([]platform.Workspace, map[string]string, error) {
	in := &dynamodb.QueryInput{
		IndexName:                 aws.String(GSI2),
		KeyConditionExpression:    aws.String("gsi2pk = :pk"),
		ExpressionAttributeValues: item{":pk": str(publicWorkspacesGSI)},
	}
	if search != "" {
		in.FilterExpression = aws.String("contains(#n, :q)")
		in.ExpressionAttributeNames = map[string]string{"#n": attrPublicName}
		in.ExpressionAttributeValues[":q"] = str(strings.ToLower(search))
	}
	items, next, err := s.queryPage(ctx, in, p)
	if err != nil {
		return nil, nil, err
	}
	out := make([]platform.Workspace, 0, len(items))
	for _, it := range items {
		w, err := workspaceFrom(it)
		if err != nil {
			return nil, nil, err
		}
		if w.IsPublic {
			out = append(out, w.Workspace)
		}
	}
	return out, next, nil
}

// errLastOwnerOf refuses deleting an account that is the last owner of a workspace.
func errLastOwnerOf(ws string) error {
	return platform.Forbidden("the account is the last owner of workspace %q: make another member owner, or delete the workspace, first", ws)
}

// DeleteAccount deletes an account: its memberships (refused, with nothing
// written, while it is the last owner of a workspace: each owner
// membership lowers that workspace's owner counter, never below one), its
// personal access tokens (they stop authenticating), its preferences, its
// email claim and the account itself. It is one transaction when it fits
// (100 items: an account with a few memberships and tokens); otherwise the
// memberships go first, each in its own transaction, and the account with
// its email last, so an interrupted deletion leaves an account that can
// retry.
func (s *Store) DeleteAccount(ctx context.Context, id string) error {
	acct, err := s.GetAccount(ctx, id)
	if err != nil {
		return err
	}
	memberships, err := queryAllItems(ctx, s, &dynamodb.QueryInput{
		IndexName:                 aws.String(GSI1),
		KeyConditionExpression:    aws.String("gsi1pk = :pk"),
		ExpressionAttributeValues: item{":pk": str(accountWorkspacesGSI(id))},
	})
	if err != nil {
		return err
	}
	owned, err := queryAllItems(ctx, s, &dynamodb.QueryInput{
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: item{":pk": str(accountPK(id))},
		ConsistentRead:            aws.Bool(true),
	})
	if err != nil {
		return err
	}

	// Each write is paired with the error its failed condition means; a
	// group's writes go in one transaction.
	type write struct {
		w        types.TransactWriteItem
		conflict error
	}
	var members, rest [][]write
	changed := platform.Errorf(platform.ErrResourceLocked, "account %q changed concurrently, retry", id)
	for _, m := range memberships {
		ws := strings.TrimPrefix(getS(m, attrPK), "WS#")
		defer s.forgetMember(ws, strings.TrimPrefix(getS(m, attrSK), skMember)) // authz_cache.go
		role := getS(m, "role")
		g := []write{
			{types.TransactWriteItem{Delete: &types.Delete{
				Key:                       key(getS(m, attrPK), getS(m, attrSK)),
				ConditionExpression:       aws.String("#r = :old"),
				ExpressionAttributeNames:  map[string]string{"#r": "role"},
				ExpressionAttributeValues: item{":old": str(role)},
			}}, changed},
			{types.TransactWriteItem{Delete: &types.Delete{Key: key(getS(m, attrPK), skMemberID+getS(m, "memberId"))}}, changed},
		}
		if platform.Role(role) == platform.RoleOwner {
			g = append(g, write{addCounter(workspacePK(ws), skWorkspace, attrOwners, -1, 2), errLastOwnerOf(ws)})
		}
		members = append(members, g)
	}
	for _, it := range owned {
		sk := getS(it, attrSK)
		if sk == skAccount {
			continue // last, with the email
		}
		g := []write{{types.TransactWriteItem{Delete: &types.Delete{Key: key(accountPK(id), sk)}}, changed}}
		if strings.HasPrefix(sk, "PAT#") {
			defer s.tokens.Forget(getS(it, "hash"))
			g = append(g, write{types.TransactWriteItem{Delete: &types.Delete{Key: key(tokenPK(getS(it, "hash")), skToken)}}, changed})
		}
		rest = append(rest, g)
	}
	rest = append(rest, []write{
		{types.TransactWriteItem{Delete: &types.Delete{Key: key(emailPK(acct.Email), skEmail)}}, changed},
		{types.TransactWriteItem{Delete: &types.Delete{Key: key(accountPK(id), skAccount), ConditionExpression: aws.String("attribute_exists(pk)")}}, platform.NotFound("account", id)},
	})

	run := func(ws []write) error {
		items := make([]types.TransactWriteItem, len(ws))
		for i := range ws {
			items[i] = ws[i].w
		}
		return s.transact(ctx, items, func(i int) error {
			if i < 0 || i >= len(ws) {
				return changed
			}
			return ws[i].conflict
		})
	}
	// Pack groups into transactions of at most 100 items, in order: all
	// of it in one when it fits; else every membership first (a refused
	// last owner stops the deletion before any token is gone), the
	// account and its email last.
	const maxTransact = 100
	var batch []write
	for _, g := range append(members, rest...) {
		if len(batch)+len(g) > maxTransact {
			if err := run(batch); err != nil {
				return err
			}
			batch = nil
		}
		batch = append(batch, g...)
	}
	return run(batch)
}
