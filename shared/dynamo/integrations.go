package dynamo

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/platform"
)

// Keys of the integrations catalogue (docs/bots.md).
func intPK(id string) string                    { return "INT#" + id }
func intNamePK(ws, name string) string          { return "INTNAME#" + ws + "#" + name }
func intPubPK(name string) string               { return "INTPUB#" + name }
func workspaceIntegrationsGSI(ws string) string { return "WS#" + ws + "#INTS" }

const (
	skInt = "INT"
	// publicIntegrationsGSI gathers (on gsi2) every public version of every
	// workspace: the shared part of the catalogue.
	publicIntegrationsGSI = "INTS#PUBLIC"
	skIntPub              = "INTPUB"
	attrInstalls          = "installCount"
	attrSummary           = "summary" // what lists read: see integrationListing
)

func intNameSK(version string) string { return "V#" + version }

// integrationDoc is how an integration version is stored: its wire form
// plus what the wire does not carry.
type integrationDoc struct {
	platform.Integration
	StoredWorkspace string            `json:"_ws"`
	StoredSecrets   map[string]string `json:"_secrets,omitempty"`
	StoredCode      string            `json:"_codeKey,omitempty"`
	StoredIcon      string            `json:"_iconKey,omitempty"`
	StoredReadme    string            `json:"_readmeKey,omitempty"`
}

// IntegrationRecord is an integration version with the version its doc was
// read at.
type IntegrationRecord struct {
	platform.Integration
	ver int64
}

// IntegrationListing is what a list reads of an integration version: its
// list form and what filters, searches and sorts need.
type IntegrationListing struct {
	platform.IntegrationSummary
	Dev          bool     `json:"dev"`
	Actions      []string `json:"_actions"`      // names
	ActionTitles []string `json:"_actionTitles"` // same order as Actions
	Interfaces   []string `json:"_interfaces"`   // names
	InterfaceIDs []string `json:"_interfaceIds"` // same order as Interfaces
	WorkspaceID  string   `json:"_ws"`
	InstallCount int64    `json:"-"`
}

func listingOf(i platform.Integration) IntegrationListing {
	l := IntegrationListing{IntegrationSummary: i.Summary(), Dev: i.Dev, WorkspaceID: i.WorkspaceID,
		Actions: []string{}, ActionTitles: []string{}, Interfaces: []string{}, InterfaceIDs: []string{}}
	names := make([]string, 0, len(i.Actions))
	for n := range i.Actions {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		var a struct {
			Title string `json:"title"`
		}
		_ = json.Unmarshal(i.Actions[n], &a)
		l.Actions, l.ActionTitles = append(l.Actions, n), append(l.ActionTitles, a.Title)
	}
	names = names[:0]
	for n := range i.Interfaces {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		var f struct {
			ID   string `json:"id"`
			Name string `json:"name"`
		}
		_ = json.Unmarshal(i.Interfaces[n], &f)
		if f.Name == "" {
			f.Name = n
		}
		l.Interfaces, l.InterfaceIDs = append(l.Interfaces, f.Name), append(l.InterfaceIDs, f.ID)
	}
	return l
}

// listed reports whether a version appears in other workspaces' lists.
func listed(i platform.Integration) bool { return i.Visibility == platform.VisibilityPublic && !i.Dev }

// shared reports whether other workspaces may reach a version at all.
func shared(i platform.Integration) bool { return platform.SharedVisibility(i.Visibility) && !i.Dev }

func integrationItem(i platform.Integration) (item, error) {
	it, err := docItem(intPK(i.ID), skInt, integrationDoc{Integration: i, StoredWorkspace: i.WorkspaceID, StoredSecrets: i.SecretValues,
		StoredCode: i.CodeKey, StoredIcon: i.IconKey, StoredReadme: i.ReadmeKey})
	if err != nil {
		return nil, err
	}
	if err := setIntegrationAttrs(it, i); err != nil {
		return nil, err
	}
	it[attrInstalls] = num(0)
	return it, nil
}

// setIntegrationAttrs sets the attributes derived from the doc: the
// owner, the list summary, and the index keys.
func setIntegrationAttrs(it item, i platform.Integration) error {
	sum, err := json.Marshal(listingOf(i))
	if err != nil {
		return err
	}
	it["workspaceId"] = str(i.WorkspaceID)
	it[attrSummary] = str(string(sum))
	it[attrGSI1PK] = str(workspaceIntegrationsGSI(i.WorkspaceID))
	it[attrGSI1SK] = str(i.CreatedAt + "#" + i.ID)
	if listed(i) {
		it[attrGSI2PK] = str(publicIntegrationsGSI)
		it[attrGSI2SK] = str(i.CreatedAt + "#" + i.ID)
	}
	return nil
}

func integrationFrom(it item) (IntegrationRecord, error) {
	var d integrationDoc
	if err := decodeDoc(it, &d); err != nil {
		return IntegrationRecord{}, err
	}
	i := d.Integration
	i.WorkspaceID, i.SecretValues = d.StoredWorkspace, d.StoredSecrets
	i.CodeKey, i.IconKey, i.ReadmeKey = d.StoredCode, d.StoredIcon, d.StoredReadme
	i.InstallCount = getN(it, attrInstalls)
	return IntegrationRecord{Integration: i, ver: getN(it, attrVer)}, nil
}

func nameItem(i platform.Integration) item {
	it := integrationNames.slot(i.WorkspaceID, i.Name, i.Version, i.ID)
	it["visibility"] = str(i.Visibility)
	return it
}

// CreateIntegration stores a new integration version. A production version
// takes its (workspace, name, version) slot, so a version is created once;
// a public or unlisted one also claims its name across workspaces. Dev
// versions take no slot: each dev session gets its own.
func (s *Store) CreateIntegration(ctx context.Context, i platform.Integration) error {
	it, err := integrationItem(i)
	if err != nil {
		return err
	}
	if err := checkItemSize(it); err != nil {
		return err
	}
	// The workspace's integration counter comes first: the version is
	// only created while its workspace exists (see attrIntegrations).
	items := []types.TransactWriteItem{
		addCounter(workspacePK(i.WorkspaceID), skWorkspace, attrIntegrations, 1, 0),
		putNew(it),
	}
	if !i.Dev {
		items = append(items, putNew(nameItem(i)))
		if shared(i) {
			items = append(items, integrationNames.claimName(i.WorkspaceID, i.Name))
		}
	}
	return s.transact(ctx, items, func(idx int) error {
		switch idx {
		case 0:
			return platform.NotFound("workspace", i.WorkspaceID)
		case 2:
			return platform.Errorf(platform.ErrAlreadyExists, "integration %s version %s already exists: versions are immutable, publish a new version", i.Name, i.Version)
		case 3:
			return integrationNames.errNameTaken(i.Name)
		}
		return platform.Errorf(platform.ErrAlreadyExists, "integration %q already exists", i.ID)
	})
}

// maxItemBytes keeps records under DynamoDB's 400 KB item limit.
const maxItemBytes = 350 << 10

func checkItemSize(it item) error {
	if n := len(getS(it, attrDoc)) + len(getS(it, attrSummary)); n > maxItemBytes {
		return platform.Errorf(platform.ErrPayloadTooLarge, "the definition is too large (%d bytes of at most %d)", n, maxItemBytes)
	}
	return nil
}

// replaceCountedDoc rewrites the doc of a record that counts its installs
// (integration and plugin versions), its summary and its public-list keys
// (taken from it, the record rebuilt; removed when not listed), only if
// its version is still ver. An update, not a put: the install counter,
// which bots' changes ADD to, is kept as it is.
func replaceCountedDoc(k item, doc types.AttributeValue, it item, ver int64, listed bool) types.TransactWriteItem {
	names := map[string]string{"#doc": attrDoc, "#ver": attrVer, "#sum": attrSummary, "#g2pk": attrGSI2PK, "#g2sk": attrGSI2SK}
	vals := item{":doc": doc, ":next": num(ver + 1), ":ver": num(ver), ":sum": it[attrSummary]}
	expr := "SET #doc = :doc, #ver = :next, #sum = :sum"
	if listed {
		expr += ", #g2pk = :g2pk, #g2sk = :g2sk"
		vals[":g2pk"], vals[":g2sk"] = it[attrGSI2PK], it[attrGSI2SK]
	} else {
		expr += " REMOVE #g2pk, #g2sk"
	}
	return types.TransactWriteItem{Update: &types.Update{
		Key: k, UpdateExpression: aws.String(expr),
		ConditionExpression:      aws.String("#ver = :ver"),
		ExpressionAttributeNames: names, ExpressionAttributeValues: vals,
	}}
}

// deleteUninstalled deletes a record that counts its installs only while
// nothing has it installed: the caller reads the counter again to tell
// why a cancelled delete failed.
func deleteUninstalled(k item) types.TransactWriteItem {
	return types.TransactWriteItem{Delete: &types.Delete{
		Key:                       k,
		ConditionExpression:       aws.String("attribute_exists(pk) AND (attribute_not_exists(#n) OR #n <= :zero)"),
		ExpressionAttributeNames:  map[string]string{"#n": attrInstalls},
		ExpressionAttributeValues: item{":zero": num(0)},
	}}
}

// GetIntegration reads an integration version by id (one GetItem).
func (s *Store) GetIntegration(ctx context.Context, id string) (IntegrationRecord, error) {
	it, err := s.getRecord(ctx, "integration", platform.PrefixIntegration, id, intPK(id), skInt)
	if err != nil {
		return IntegrationRecord{}, err
	}
	return integrationFrom(it)
}

// IntegrationsByID reads integration versions by id (BatchGetItem); missing
// ones are absent from the result.
func (s *Store) IntegrationsByID(ctx context.Context, ids []string) (map[string]platform.Integration, error) {
	valid := make([]string, 0, len(ids))
	for _, id := range ids {
		if platform.HasPrefix(id, platform.PrefixIntegration) {
			valid = append(valid, id)
		}
	}
	return batchGetByID(ctx, s, valid, func(id string) item { return key(intPK(id), skInt) },
		func(it item) (string, platform.Integration, error) {
			r, err := integrationFrom(it)
			return r.ID, r.Integration, err
		})
}

// IntegrationByName finds the version of an integration named name that
// workspace ws sees: its own production versions first, else the shared
// versions of the workspace publishing the name. version is a semantic
// version or "latest" (the highest version, releases before pre-releases).
// Queries the name's versions (one Query, plus one GetItem for a foreign
// name's publisher), then reads the version (one GetItem).
func (s *Store) IntegrationByName(ctx context.Context, ws, name, version string) (IntegrationRecord, error) {
	notFound := platform.NotFound("integration", name+"@"+version)
	id, err := s.versionIDByName(ctx, integrationNames, ws, name, version)
	if err != nil {
		return IntegrationRecord{}, err
	}
	if id == "" {
		return IntegrationRecord{}, notFound
	}
	r, err := s.GetIntegration(ctx, id)
	if platform.TypeOf(err) == platform.ErrResourceNotFound {
		return r, notFound
	}
	if err == nil && !r.VisibleTo(ws) {
		return IntegrationRecord{}, notFound
	}
	return r, err
}

// UpdateIntegration applies change to a version of workspace ws, replacing
// its doc only if unchanged since read (retried on conflict). A version
// becoming public or unlisted claims its name; the name slot carries the
// new visibility.
func (s *Store) UpdateIntegration(ctx context.Context, ws, id string, change func(*platform.Integration) error) (platform.Integration, error) {
	var out platform.Integration
	err := optimistic(ctx, fmt.Sprintf("integration %q", id), func() error {
		rec, i, newIt, err := s.changedIntegration(ctx, ws, id, change)
		if err != nil {
			return err
		}
		b, _ := json.Marshal(integrationDoc{Integration: i, StoredWorkspace: i.WorkspaceID, StoredSecrets: i.SecretValues,
			StoredCode: i.CodeKey, StoredIcon: i.IconKey, StoredReadme: i.ReadmeKey})
		items := []types.TransactWriteItem{replaceCountedDoc(key(intPK(id), skInt), str(string(b)), newIt, rec.ver, listed(i))}
		if !i.Dev && i.Visibility != rec.Visibility {
			items = append(items, types.TransactWriteItem{Put: &types.Put{Item: nameItem(i)}})
			if shared(i) {
				items = append(items, integrationNames.claimName(ws, i.Name))
			}
		}
		err = s.transact(ctx, items, func(idx int) error {
			if idx == 2 {
				return integrationNames.errNameTaken(i.Name)
			}
			return errRetry
		})
		if err == nil {
			i.InstallCount = rec.InstallCount
			out = i
		}
		return err
	})
	return out, err
}

// DeleteIntegration deletes a version of workspace ws that no bot has
// installed (a condition on its install counter), its name slot, then its
// API keys. The name stays claimed by the workspace.
func (s *Store) DeleteIntegration(ctx context.Context, ws, id string) error {
	rec, err := s.GetIntegration(ctx, id)
	if err != nil {
		return err
	}
	if rec.WorkspaceID != ws {
		if rec.VisibleTo(ws) {
			return platform.Forbidden("integration %q belongs to another workspace", id)
		}
		return platform.NotFound("integration", id)
	}
	items := []types.TransactWriteItem{deleteUninstalled(key(intPK(id), skInt)), addCounter(workspacePK(ws), skWorkspace, attrIntegrations, -1, 0)}
	if !rec.Dev {
		items = append(items, integrationNames.freeSlot(ws, rec.Name, rec.Version, id))
	}
	err = s.transact(ctx, items, func(int) error { return errRetry })
	if err == errRetry {
		again, gerr := s.GetIntegration(ctx, id)
		if gerr != nil {
			return gerr
		}
		return platform.Errorf(platform.ErrReferenceConstrain, "integration %q is installed on %d bot(s): uninstall it first", id, again.InstallCount)
	}
	if err != nil {
		return err
	}
	keys, err := s.ListIntegrationAPIKeys(ctx, id)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if err := s.DeleteIntegrationAPIKey(ctx, ws, k.ID); err != nil && platform.TypeOf(err) != platform.ErrResourceNotFound {
			return err
		}
	}
	return nil
}

// SetVerificationStatus moves a version of ws to status, only from one of
// the from statuses (a conditional update of its doc).
func (s *Store) SetVerificationStatus(ctx context.Context, ws, id, status string, from ...string) (platform.Integration, error) {
	return s.UpdateIntegration(ctx, ws, id, func(i *platform.Integration) error {
		for _, f := range from {
			if i.VerificationStatus == f {
				i.VerificationStatus = status
				return nil
			}
		}
		return platform.Errorf(platform.ErrRelationConflict, "integration %q is %s: verification cannot be requested", id, i.VerificationStatus)
	})
}

func listingFrom(it item) (IntegrationListing, error) {
	var l IntegrationListing
	if err := json.Unmarshal([]byte(getS(it, attrSummary)), &l); err != nil {
		return l, err
	}
	l.InstallCount = getN(it, attrInstalls)
	return l, nil
}

// ListIntegrationCandidates reads the catalogue workspace ws sees: its own
// versions (Query on gsi1) and every workspace's listed public versions
// (Query on gsi2), only the list attributes. Lists filter and sort these in
// memory: one pass over the catalogue per call (docs/bots.md).
func (s *Store) ListIntegrationCandidates(ctx context.Context, ws string) ([]IntegrationListing, error) {
	proj := aws.String("pk, sk, #sum, #n")
	names := map[string]string{"#sum": attrSummary, "#n": attrInstalls}
	own, err := queryAllItems(ctx, s, &dynamodb.QueryInput{
		IndexName:                 aws.String(GSI1),
		KeyConditionExpression:    aws.String("gsi1pk = :pk"),
		ExpressionAttributeValues: item{":pk": str(workspaceIntegrationsGSI(ws))},
		ProjectionExpression:      proj, ExpressionAttributeNames: names,
	})
	if err != nil {
		return nil, err
	}
	public, err := queryAllItems(ctx, s, &dynamodb.QueryInput{
		IndexName:                 aws.String(GSI2),
		KeyConditionExpression:    aws.String("gsi2pk = :pk"),
		ExpressionAttributeValues: item{":pk": str(publicIntegrationsGSI)},
		ProjectionExpression:      proj, ExpressionAttributeNames: names,
	})
	if err != nil {
		return nil, err
	}
	out := make([]IntegrationListing, 0, len(own)+len(public))
	seen := map[string]bool{}
	for _, it := range append(own, public...) {
		l, err := listingFrom(it)
		if err != nil {
			return nil, err
		}
		if !seen[l.ID] {
			seen[l.ID] = true
			out = append(out, l)
		}
	}
	return out, nil
}

// IntegrationListingsByID reads the list form of versions by id (BatchGetItem).
func (s *Store) IntegrationListingsByID(ctx context.Context, ids []string) ([]IntegrationListing, error) {
	var keys []item
	seen := map[string]bool{}
	for _, id := range ids {
		if !seen[id] && platform.HasPrefix(id, platform.PrefixIntegration) {
			seen[id] = true
			keys = append(keys, key(intPK(id), skInt))
		}
	}
	out := []IntegrationListing{}
	if len(keys) == 0 {
		return out, nil
	}
	items, err := s.batchGet(ctx, keys)
	if err != nil {
		return nil, err
	}
	for _, it := range items {
		l, err := listingFrom(it)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}

// WorkspacesByID reads workspaces by id (BatchGetItem); missing ones are absent.
func (s *Store) WorkspacesByID(ctx context.Context, ids []string) (map[string]platform.Workspace, error) {
	return batchGetByID(ctx, s, ids, func(id string) item { return key(workspacePK(id), skWorkspace) },
		func(it item) (string, platform.Workspace, error) {
			w, err := workspaceFrom(it)
			return w.ID, w.Workspace, err
		})
}

// IntegrationByID reads an integration version (the runtime's view).
func (s *Store) IntegrationByID(ctx context.Context, id string) (platform.Integration, error) {
	r, err := s.GetIntegration(ctx, id)
	return r.Integration, err
}

// changedIntegration reads version id of workspace ws (a foreign one is
// 403 when visible, else 404), applies change to a copy and builds its
// item, size-checked: what UpdateIntegration writes and its dry run checks.
func (s *Store) changedIntegration(ctx context.Context, ws, id string, change func(*platform.Integration) error) (IntegrationRecord, platform.Integration, item, error) {
	rec, err := s.GetIntegration(ctx, id)
	if err != nil {
		return rec, platform.Integration{}, nil, err
	}
	if rec.WorkspaceID != ws {
		if rec.VisibleTo(ws) {
			return rec, platform.Integration{}, nil, platform.Forbidden("integration %q belongs to another workspace", id)
		}
		return rec, platform.Integration{}, nil, platform.NotFound("integration", id)
	}
	i := rec.Integration
	if err := change(&i); err != nil {
		return rec, i, nil, err
	}
	i.UpdatedAt = platform.Now()
	it, err := integrationItem(i)
	if err != nil {
		return rec, i, nil, err
	}
	return rec, i, it, checkItemSize(it)
}
