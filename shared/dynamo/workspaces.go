package dynamo

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/platform"
)

func workspacePK(id string) string { return "WS#" + id }
func handlePK(h string) string     { return "HANDLE#" + h }

const (
	skWorkspace = "WS"
	skHandle    = "HANDLE"
	skMember    = "MEMBER#"   // + account id
	skMemberID  = "MEMBERID#" // + member id: points at the member's account
	attrBots    = "botCount"
	// attrIntegrations counts a workspace's integration versions: a
	// workspace is deleted only while it is 0, and creating a version
	// raises it in its own transaction (which fails once the workspace is
	// gone), so no integration can outlive its workspace.
	attrIntegrations = "intCount"
	attrOwners       = "ownerCount"
)

// WorkspaceRecord is a workspace with the version its doc was read at.
type WorkspaceRecord struct {
	platform.Workspace
	ver int64
}

func workspaceFrom(it item) (WorkspaceRecord, error) {
	var w WorkspaceRecord
	if err := decodeDoc(it, &w.Workspace); err != nil {
		return w, err
	}
	w.BotCount = int(getN(it, attrBots))
	w.ver = getN(it, attrVer)
	return w, nil
}

// CreateWorkspace creates a workspace owned by account, in one transaction
// with the owner's membership.
func (s *Store) CreateWorkspace(ctx context.Context, owner platform.Account, name string) (platform.Workspace, error) {
	now := platform.Now()
	w := platform.Workspace{
		ID: platform.NewID(platform.PrefixWorkspace), Name: name, OwnerID: owner.ID,
		CreatedAt: now, UpdatedAt: now, BillingVersion: "v1", Plan: "community",
		SpendingLimit: 100, SocialAccounts: []string{},
	}
	wsItem, err := docItem(workspacePK(w.ID), skWorkspace, w)
	if err != nil {
		return w, err
	}
	wsItem[attrBots] = num(0)
	wsItem[attrOwners] = num(1)
	m := platform.Member{ID: platform.NewID(platform.PrefixMember), UserID: owner.ID, Email: owner.Email, CreatedAt: now, Role: platform.RoleOwner, WorkspaceID: w.ID}
	items := []types.TransactWriteItem{putNew(wsItem)}
	mItems, err := memberItems(m)
	if err != nil {
		return w, err
	}
	err = s.transact(ctx, append(items, mItems...), nil)
	return w, err
}

func memberItems(m platform.Member) ([]types.TransactWriteItem, error) {
	it, err := docItem(workspacePK(m.WorkspaceID), skMember+m.UserID, m)
	if err != nil {
		return nil, err
	}
	it["role"] = str(string(m.Role))
	it["memberId"] = str(m.ID)
	it[attrGSI1PK] = str(accountWorkspacesGSI(m.UserID))
	it[attrGSI1SK] = str(m.CreatedAt + "#" + m.WorkspaceID)
	ptr := key(workspacePK(m.WorkspaceID), skMemberID+m.ID)
	ptr["accountId"] = str(m.UserID)
	return []types.TransactWriteItem{putNew(it), putNew(ptr)}, nil
}

// GetWorkspace reads a workspace (one GetItem).
func (s *Store) GetWorkspace(ctx context.Context, id string) (WorkspaceRecord, error) {
	it, err := s.get(ctx, workspacePK(id), skWorkspace)
	if err != nil {
		return WorkspaceRecord{}, err
	}
	if it == nil {
		return WorkspaceRecord{}, platform.NotFound("workspace", id)
	}
	return workspaceFrom(it)
}

// WorkspaceByHandle finds the workspace holding a handle.
func (s *Store) WorkspaceByHandle(ctx context.Context, handle string) (string, bool, error) {
	it, err := s.get(ctx, handlePK(handle), skHandle)
	if err != nil || it == nil {
		return "", false, err
	}
	return getS(it, "workspaceId"), true, nil
}

// ListWorkspacesOf lists the workspaces an account is a member of, oldest
// membership first: one Query on GSI1 and one BatchGetItem a page.
func (s *Store) ListWorkspacesOf(ctx context.Context, accountID string, p Page) ([]platform.Workspace, map[string]string, error) {
	items, next, err := s.queryPage(ctx, &dynamodb.QueryInput{
		IndexName:                 aws.String(GSI1),
		KeyConditionExpression:    aws.String("gsi1pk = :pk"),
		ExpressionAttributeValues: item{":pk": str(accountWorkspacesGSI(accountID))},
	}, p)
	if err != nil || len(items) == 0 {
		return []platform.Workspace{}, next, err
	}
	return s.workspacesOfMembers(ctx, items, next)
}

func (s *Store) workspacesOfMembers(ctx context.Context, members []item, next map[string]string) ([]platform.Workspace, map[string]string, error) {
	ids := make([]string, 0, len(members))
	for _, m := range members {
		ids = append(ids, strings.TrimPrefix(getS(m, attrPK), "WS#"))
	}
	byID, err := s.WorkspacesByID(ctx, ids)
	if err != nil {
		return nil, nil, err
	}
	out := make([]platform.Workspace, 0, len(ids))
	for _, id := range ids {
		if w, ok := byID[id]; ok {
			out = append(out, w)
		}
	}
	return out, next, nil
}

// WorkspacePatch holds the fields of an updateWorkspace call; nil means unchanged.
type WorkspacePatch struct {
	Name           *string   `json:"name"`
	SpendingLimit  *float64  `json:"spendingLimit"`
	About          *string   `json:"about"`
	ProfilePicture *string   `json:"profilePicture"`
	ContactEmail   *string   `json:"contactEmail"`
	Website        *string   `json:"website"`
	SocialAccounts *[]string `json:"socialAccounts"`
	IsPublic       *bool     `json:"isPublic"`
	Handle         *string   `json:"handle"`
}

// UpdateWorkspace applies a patch. The doc is replaced only if unchanged
// since it was read; a handle moves in the same transaction, under a
// condition that no other workspace holds it.
func (s *Store) UpdateWorkspace(ctx context.Context, id string, p WorkspacePatch) (platform.Workspace, error) {
	var out platform.Workspace
	err := optimistic(ctx, fmt.Sprintf("workspace %q", id), func() error {
		rec, err := s.GetWorkspace(ctx, id)
		if err != nil {
			return err
		}
		w := rec.Workspace
		oldHandle := w.Handle
		set := func(dst *string, v *string) {
			if v != nil {
				*dst = *v
			}
		}
		set(&w.Name, p.Name)
		set(&w.About, p.About)
		set(&w.ProfilePicture, p.ProfilePicture)
		set(&w.ContactEmail, p.ContactEmail)
		set(&w.Website, p.Website)
		set(&w.Handle, p.Handle)
		if p.SpendingLimit != nil {
			w.SpendingLimit = *p.SpendingLimit
		}
		if p.SocialAccounts != nil {
			w.SocialAccounts = *p.SocialAccounts
		}
		if p.IsPublic != nil {
			w.IsPublic = *p.IsPublic
		}
		w.UpdatedAt = platform.Now()
		var index map[string]types.AttributeValue
		if w.IsPublic || rec.IsPublic {
			index = publicWorkspaceIndex(w) // listPublicWorkspaces (account_settings.go)
		}
		upd, err := replaceDoc(workspacePK(id), skWorkspace, w, rec.ver, index)
		if err != nil {
			return err
		}
		items := []types.TransactWriteItem{upd}
		if w.Handle != oldHandle {
			h := key(handlePK(w.Handle), skHandle)
			h["workspaceId"] = str(id)
			items = append(items, putNew(h))
			if oldHandle != "" {
				items = append(items, types.TransactWriteItem{Delete: &types.Delete{Key: key(handlePK(oldHandle), skHandle)}})
			}
		}
		err = s.transact(ctx, items, func(i int) error {
			if i == 1 {
				return platform.Errorf(platform.ErrAlreadyExists, "handle %q is taken", w.Handle)
			}
			return errRetry
		})
		w.BotCount = rec.BotCount
		out = w
		return err
	})
	return out, err
}

// DeleteWorkspace deletes an empty workspace (no integrations or interfaces; no bots: the
// condition on its bot counter refuses otherwise), then its memberships and
// handle.
func (s *Store) DeleteWorkspace(ctx context.Context, id string) error {
	rec, err := s.GetWorkspace(ctx, id)
	if err != nil {
		return err
	}
	ints, err := s.db.Query(ctx, &dynamodb.QueryInput{
		TableName:                 &s.table,
		IndexName:                 aws.String(GSI1),
		KeyConditionExpression:    aws.String("gsi1pk = :pk"),
		ExpressionAttributeValues: item{":pk": str(workspaceIntegrationsGSI(id))},
		Limit:                     aws.Int32(1),
	})
	if err != nil {
		return err
	}
	if len(ints.Items) > 0 {
		return platform.Errorf(platform.ErrReferenceConstrain, "workspace %q still has integrations: delete them first", id)
	}
	if err := s.checkNoVersions(ctx, interfacesCatalogue, id); err != nil {
		return err
	}
	if err := s.checkNoVersions(ctx, pluginsCatalogue, id); err != nil {
		return err
	}
	_, err = s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                           &s.table,
		Key:                                 key(workspacePK(id), skWorkspace),
		ConditionExpression:                 aws.String("attribute_exists(pk) AND #b = :zero AND (attribute_not_exists(#i) OR #i <= :zero)"),
		ExpressionAttributeNames:            map[string]string{"#b": attrBots, "#i": attrIntegrations},
		ExpressionAttributeValues:           item{":zero": num(0)},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var cf *types.ConditionalCheckFailedException
	if errors.As(err, &cf) {
		if getN(cf.Item, attrIntegrations) > 0 {
			return platform.Errorf(platform.ErrReferenceConstrain, "workspace %q still has integrations: delete them first", id)
		}
		return platform.Errorf(platform.ErrReferenceConstrain, "workspace %q still has bots: delete them first", id)
	}
	if err != nil {
		return err
	}
	keys, err := s.queryAllKeys(ctx, workspacePK(id), "MEMBER")
	if err != nil {
		return err
	}
	if rec.Handle != "" {
		keys = append(keys, key(handlePK(rec.Handle), skHandle))
	}
	return s.batchDelete(ctx, keys)
}

func isConditionFailed(err error) bool {
	var c *types.ConditionalCheckFailedException
	return err != nil && errors.As(err, &c)
}

// GetMember reads an account's membership of a workspace (one GetItem); the
// authorization check of every workspace-scoped call.
func (s *Store) GetMember(ctx context.Context, workspaceID, accountID string) (platform.Member, bool, error) {
	it, err := s.get(ctx, workspacePK(workspaceID), skMember+accountID)
	if err != nil || it == nil {
		return platform.Member{}, false, err
	}
	var m platform.Member
	if err := decodeDoc(it, &m); err != nil {
		return m, false, err
	}
	m.WorkspaceID = workspaceID
	m.Role = platform.Role(getS(it, "role"))
	return m, true, nil
}

// GetMemberByID reads a member by its member id (two GetItems).
func (s *Store) GetMemberByID(ctx context.Context, workspaceID, memberID string) (platform.Member, error) {
	ptr, err := s.get(ctx, workspacePK(workspaceID), skMemberID+memberID)
	if err != nil {
		return platform.Member{}, err
	}
	if ptr != nil {
		m, ok, err := s.GetMember(ctx, workspaceID, getS(ptr, "accountId"))
		if err != nil || ok {
			return m, err
		}
	}
	return platform.Member{}, platform.NotFound("workspace member", memberID)
}

// ListMembers lists a workspace's members (one Query a page).
func (s *Store) ListMembers(ctx context.Context, workspaceID string, p Page) ([]platform.Member, map[string]string, error) {
	items, next, err := s.queryPage(ctx, &dynamodb.QueryInput{
		KeyConditionExpression:    aws.String("pk = :pk AND begins_with(sk, :p)"),
		ExpressionAttributeValues: item{":pk": str(workspacePK(workspaceID)), ":p": str(skMember)},
		ConsistentRead:            aws.Bool(true),
	}, p)
	if err != nil {
		return nil, nil, err
	}
	out := make([]platform.Member, 0, len(items))
	for _, it := range items {
		var m platform.Member
		if err := decodeDoc(it, &m); err != nil {
			return nil, nil, err
		}
		m.Role = platform.Role(getS(it, "role"))
		out = append(out, m)
	}
	return out, next, nil
}

// AddMember makes account a member of the workspace with role.
func (s *Store) AddMember(ctx context.Context, workspaceID string, acct platform.Account, role platform.Role) (platform.Member, error) {
	m, items, err := memberWrites(workspaceID, acct, role)
	if err != nil {
		return m, err
	}
	return m, s.transact(ctx, items, memberConflict(workspaceID, acct.Email))
}

// memberWrites are the writes making acct a member of a workspace with
// role: the member and member-id items, and the workspace's owner counter
// (or a check that the workspace exists), in this order.
func memberWrites(workspaceID string, acct platform.Account, role platform.Role) (platform.Member, []types.TransactWriteItem, error) {
	m := platform.Member{ID: platform.NewID(platform.PrefixMember), UserID: acct.ID, Email: acct.Email,
		DisplayName: acct.DisplayName, ProfilePicture: acct.ProfilePicture,
		CreatedAt: platform.Now(), Role: role, WorkspaceID: workspaceID}
	items, err := memberItems(m)
	if err != nil {
		return m, nil, err
	}
	if role == platform.RoleOwner {
		items = append(items, addCounter(workspacePK(workspaceID), skWorkspace, attrOwners, 1, 0))
	} else {
		items = append(items, mustExist(workspacePK(workspaceID), skWorkspace))
	}
	return m, items, nil
}

// memberConflict maps a failed condition among memberWrites' writes.
func memberConflict(workspaceID, email string) func(int) error {
	return func(i int) error {
		if i == 2 {
			return platform.NotFound("workspace", workspaceID)
		}
		return platform.Errorf(platform.ErrAlreadyExists, "%s is already a member of this workspace", email)
	}
}

// InviteMember makes the account of email a member of the workspace with
// role. When no account has that email, the account (and, with firstToken,
// its first personal access token, returned) is created in the same
// transaction as the membership, so a refused invitation (workspace gone,
// already a member) writes nothing and can be retried. The email must have
// been validated (platform.ValidateEmail).
func (s *Store) InviteMember(ctx context.Context, workspaceID, email string, role platform.Role, firstToken bool) (platform.Member, *platform.NewToken, error) {
	email = NormalizeEmail(email)
	for attempt := 0; attempt < 3; attempt++ {
		acct, ok, err := s.AccountByEmail(ctx, email)
		if err != nil {
			return platform.Member{}, nil, err
		}
		if ok {
			m, err := s.AddMember(ctx, workspaceID, acct, role)
			return m, nil, err
		}
		acct = platform.Account{ID: platform.NewAccountID(), Email: email, CreatedAt: platform.Now()}
		m, items, err := memberWrites(workspaceID, acct, role)
		if err != nil {
			return m, nil, err
		}
		acctItems, err := accountWrites(acct)
		if err != nil {
			return m, nil, err
		}
		items = append(items, acctItems...) // 3: account, 4: email
		var tok *platform.NewToken
		if firstToken {
			t, patItems, err := patWrites(acct.ID, "invitation")
			if err != nil {
				return m, nil, err
			}
			tok = &t
			items = append(items, patItems...)
		}
		err = s.transact(ctx, items, func(i int) error {
			if i == 3 || i == 4 {
				return errRetry // the email was taken meanwhile: invite that account
			}
			return memberConflict(workspaceID, email)(i)
		})
		if err == errRetry {
			continue
		}
		return m, tok, err
	}
	return platform.Member{}, nil, platform.Errorf(platform.ErrResourceLocked, "account %q is being created concurrently, retry", email)
}

// errLastOwner is returned when a change would leave a workspace without an owner.
var errLastOwner = platform.Forbidden("the last owner of a workspace can be neither removed nor demoted")

// SetMemberRole changes a member's role. The member's role must still be the
// one read (else the caller retries on fresh data), and the workspace's owner
// counter moves in the same transaction, never below one.
func (s *Store) SetMemberRole(ctx context.Context, m platform.Member, role platform.Role) (platform.Member, error) {
	defer s.forgetMember(m.WorkspaceID, m.UserID) // authz_cache.go
	if m.Role == role {
		return m, nil
	}
	old := m.Role
	m.Role = role
	items := []types.TransactWriteItem{{Update: &types.Update{
		Key:                       key(workspacePK(m.WorkspaceID), skMember+m.UserID),
		UpdateExpression:          aws.String("SET #r = :new"),
		ConditionExpression:       aws.String("#r = :old"),
		ExpressionAttributeNames:  map[string]string{"#r": "role"},
		ExpressionAttributeValues: item{":new": str(string(role)), ":old": str(string(old))},
	}}}
	switch {
	case old == platform.RoleOwner:
		items = append(items, addCounter(workspacePK(m.WorkspaceID), skWorkspace, attrOwners, -1, 2))
	case role == platform.RoleOwner:
		items = append(items, addCounter(workspacePK(m.WorkspaceID), skWorkspace, attrOwners, 1, 0))
	}
	err := s.transact(ctx, items, func(i int) error {
		if i == 1 && old == platform.RoleOwner {
			return errLastOwner
		}
		return platform.Errorf(platform.ErrResourceLocked, "member %q changed concurrently, retry", m.ID)
	})
	return m, err
}

// RemoveMember deletes a membership; removing an owner keeps at least one.
func (s *Store) RemoveMember(ctx context.Context, m platform.Member) error {
	defer s.forgetMember(m.WorkspaceID, m.UserID) // authz_cache.go
	items := []types.TransactWriteItem{
		{Delete: &types.Delete{
			Key:                       key(workspacePK(m.WorkspaceID), skMember+m.UserID),
			ConditionExpression:       aws.String("#r = :old"),
			ExpressionAttributeNames:  map[string]string{"#r": "role"},
			ExpressionAttributeValues: item{":old": str(string(m.Role))},
		}},
		{Delete: &types.Delete{Key: key(workspacePK(m.WorkspaceID), skMemberID+m.ID)}},
	}
	if m.Role == platform.RoleOwner {
		items = append(items, addCounter(workspacePK(m.WorkspaceID), skWorkspace, attrOwners, -1, 2))
	}
	return s.transact(ctx, items, func(i int) error {
		if i == 2 {
			return errLastOwner
		}
		return platform.Errorf(platform.ErrResourceLocked, "member %q changed concurrently, retry", m.ID)
	})
}
