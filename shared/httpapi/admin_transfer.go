package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/files"
	"github.com/botforge/platform/shared/platform"
	"github.com/botforge/platform/shared/tables"
)

// transferRoutes is the import side of export/import (docs/export-import.md):
// entries of a portable archive (shared/archive), a chunk at a time, written
// with their ids through the store. Administrators only: it writes records
// no other operation can (given ids, past dates).
func (s *server) transferRoutes() []route {
	return append([]route{
		{pattern: "POST /v1/admin/transfer/import", op: "importArchiveEntries", scope: scopeWorkspace, role: platform.RoleAdministrator,
			ownBody: true, maxBody: maxImportBody, handle: s.importArchiveEntries},
	}, s.transferJobRoutes()...) // transfer_jobs.go: the console's export and import
}

// filesTransferRoutes: the import of files' records and the completion of
// their uploads, served by the Files area, whose function may write file
// contents (on AWS the admin function's role may not: it presigns the
// uploads). Three segments after /v1/files: copyFile's pattern has two.
func (s *server) filesTransferRoutes() []route {
	return []route{
		{pattern: "POST /v1/files/transfer/import/files", op: "importArchiveFiles", scope: scopeWorkspace, role: platform.RoleAdministrator,
			ownBody: true, maxBody: maxImportBody, handle: func(c *call) (any, error) { return s.importEntries(c, fileKinds) }},
	}
}

// fileKinds are the entries the Files area imports.
var fileKinds = map[string]bool{"file": true, "fileComplete": true}

// maxImportBody keeps a chunk within a Lambda request (6 MB) with room.
const maxImportBody = 5 << 20

// importEntry is an archive entry as the importer sends it.
type importEntry struct {
	Seq  int64           `json:"seq"`
	Kind string          `json:"kind"`
	Bot  string          `json:"bot"`
	ID   string          `json:"id"`
	Data json.RawMessage `json:"data"`
}

// importOutcome is what became of one entry: created, unchanged (already
// there, identical), conflict (already there, different: left as it is),
// skipped (not imported, Message says why) or failed.
type importOutcome struct {
	Seq       int64    `json:"seq"`
	Kind      string   `json:"kind"`
	ID        string   `json:"id"`
	Outcome   string   `json:"outcome"`
	Message   string   `json:"message,omitempty"`
	Created   int      `json:"created,omitempty"`
	Unchanged int      `json:"unchanged,omitempty"`
	Conflicts []string `json:"conflicts,omitempty"`
	// UploadURL: a file's record is written; its contents go there (a
	// presigned PUT), then a fileComplete entry finishes it.
	UploadURL string `json:"uploadUrl,omitempty"`
}

const (
	outCreated   = "created"
	outUnchanged = "unchanged"
	outConflict  = "conflict"
	outSkipped   = "skipped"
	outFailed    = "failed"
)

func (s *server) importArchiveEntries(c *call) (any, error) { return s.importEntries(c, nil) }

// importEntries imports a chunk of entries; only, when set, names the
// kinds this area imports.
func (s *server) importEntries(c *call, only map[string]bool) (any, error) {
	var in struct {
		DryRun  bool          `json:"dryRun"`
		Entries []importEntry `json:"entries"`
	}
	dec := json.NewDecoder(bytes.NewReader(c.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return nil, platform.Invalid("invalid body: %v", err)
	}
	if len(in.Entries) > 5000 {
		return nil, platform.Invalid("invalid body: field \"entries\": at most 5000 entries per call")
	}
	bots := map[string]*call{}
	out := make([]importOutcome, 0, len(in.Entries))
	for _, e := range in.Entries {
		if only != nil && !only[e.Kind] {
			return nil, platform.Invalid("invalid body: entry %d: kind %q is imported by POST /v1/admin/transfer/import", e.Seq, e.Kind)
		}
		o := importOutcome{Seq: e.Seq, Kind: e.Kind, ID: e.ID}
		err := s.importOne(c, bots, e, in.DryRun, &o)
		if err != nil {
			var pe *platform.Error
			if !errors.As(err, &pe) {
				return nil, err // a store failure: the importer retries the chunk
			}
			o.Outcome, o.Message = outFailed, pe.Message
		}
		out = append(out, o)
	}
	return map[string]any{"results": out, "dryRun": in.DryRun}, nil
}

// botCall is c scoped to bot id of c's workspace (as a Chat, Tables or
// Files call is).
func (s *server) botCall(c *call, bots map[string]*call, id string) (*call, error) {
	if bc, ok := bots[id]; ok {
		return bc, nil
	}
	b, err := s.Store.GetBot(c.ctx, id)
	if err == nil && b.WorkspaceID != c.workspaceID {
		err = platform.NotFound("bot", id)
	}
	if err != nil {
		return nil, err
	}
	bc := *c
	bc.bot = b
	bots[id] = &bc
	return &bc, nil
}

// sameJSON compares two JSON values whatever their spacing and key order,
// the members named in ignore left out of objects at the top.
func sameJSON(a, b []byte, ignore ...string) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	for _, k := range ignore {
		if m, ok := x.(map[string]any); ok {
			delete(m, k)
		}
		if m, ok := y.(map[string]any); ok {
			delete(m, k)
		}
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

func marshalled(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// compare sets o to unchanged or conflict for a record that exists.
func compare(o *importOutcome, current any, archived json.RawMessage, ignore ...string) {
	if sameJSON(marshalled(current), archived, ignore...) {
		o.Outcome = outUnchanged
		return
	}
	o.Outcome, o.Message = outConflict, "a different record with this id exists; left as it is"
}

func decodeInto(e importEntry, v any) error {
	if err := json.Unmarshal(e.Data, v); err != nil {
		return platform.Invalid("entry %d (%s %s): %v", e.Seq, e.Kind, e.ID, err)
	}
	return nil
}

func (s *server) importOne(c *call, bots map[string]*call, e importEntry, dry bool, o *importOutcome) error {
	switch e.Kind {
	case "workspace":
		o.Outcome, o.Message = outSkipped, "the archive's workspace settings are not applied: its records go into workspace "+c.workspaceID
		return nil
	case "member":
		return s.importMember(c, e, dry, o)
	case "bot":
		return s.importBot(c, bots, e, dry, o)
	case "issue":
		o.Outcome, o.Message = outSkipped, "issues are recorded by the platform as they happen; not imported"
		return nil
	}
	if !botKinds[e.Kind] {
		o.Outcome, o.Message = outSkipped, fmt.Sprintf("kind %q is not one this platform imports", e.Kind)
		return nil
	}
	if p, ok := importPrefixes[e.Kind]; ok {
		var rec struct {
			ID string `json:"id"`
		}
		json.Unmarshal(e.Data, &rec)
		if !platform.HasPrefix(rec.ID, p) {
			o.Outcome, o.Message = outFailed, fmt.Sprintf("id %q is not an id of this platform (%s and 26 characters, as Botpress Cloud's are not): import with --remap", rec.ID, p)
			return nil
		}
	}
	bc, err := s.botCall(c, bots, e.Bot)
	if isNotFound(err) {
		if dry {
			o.Outcome, o.Message = outCreated, "would be created with its bot"
			if e.Kind == "rows" { // counted row by row, as when its bot exists
				var r struct {
					Rows []json.RawMessage `json:"rows"`
				}
				json.Unmarshal(e.Data, &r)
				o.Created = len(r.Rows)
			}
			return nil
		}
	}
	if err != nil {
		return err
	}
	ctx, bot := c.ctx, bc.bot.ID
	switch e.Kind {
	case "secret":
		return s.importSecret(bc, e, dry, o)
	case "table":
		return s.importArchiveTable(bc, e, dry, o)
	case "rows":
		return s.importRows(bc, e, dry, o)
	case "file":
		return s.importFile(bc, e, dry, o)
	case "fileComplete":
		rec, err := s.Store.GetFile(ctx, e.ID)
		if err != nil {
			return err
		}
		if rec.Status != platform.FileUploadPending {
			o.Outcome = outUnchanged
			return nil
		}
		if dry {
			o.Outcome = outCreated
			return nil
		}
		if err := s.completer().ObjectCreated(ctx, rec.ObjectKey()); err != nil {
			return err
		}
		o.Outcome = outCreated
		return nil
	case "knowledgeBase":
		var kb platform.KnowledgeBase
		if err := decodeInto(e, &kb); err != nil {
			return err
		}
		cur, err := s.Store.GetKnowledgeBase(ctx, bot, kb.ID)
		return createOrCompare(o, dry, cur, err, e.Data, func() error { return s.Store.CreateKnowledgeBase(ctx, bot, kb) })
	case "user":
		var u platform.User
		if err := decodeInto(e, &u); err != nil {
			return err
		}
		cur, err := s.Store.GetUser(ctx, bot, u.ID)
		return createOrCompare(o, dry, cur, err, e.Data, func() error { return s.Store.CreateUser(ctx, bot, u) })
	case "conversation":
		var cv platform.Conversation
		if err := decodeInto(e, &cv); err != nil {
			return err
		}
		// Its messages count it again as they are imported.
		cv.MessageCount = 0
		cur, err := s.Store.GetConversation(ctx, bot, cv.ID)
		return createOrCompare(o, dry, cur, err, e.Data, func() error { return s.Store.CreateConversation(ctx, bot, cv) }, "messageCount")
	case "participants":
		var p struct {
			ConversationID string   `json:"conversationId"`
			UserIDs        []string `json:"userIds"`
		}
		if err := decodeInto(e, &p); err != nil {
			return err
		}
		for _, u := range p.UserIDs {
			_, err := s.Store.GetParticipant(ctx, bot, p.ConversationID, u)
			switch {
			case err == nil:
				o.Unchanged++
			case isNotFound(err):
				if !dry {
					if _, err := s.Store.AddParticipant(ctx, bot, p.ConversationID, u); err != nil {
						return err
					}
				}
				o.Created++
			default:
				return err
			}
		}
		o.Outcome = outUnchanged
		if o.Created > 0 {
			o.Outcome = outCreated
		}
		return nil
	case "message":
		var m platform.Message
		if err := decodeInto(e, &m); err != nil {
			return err
		}
		cur, err := s.Store.GetMessage(ctx, bot, m.ID)
		return createOrCompare(o, dry, cur, err, e.Data, func() error { return s.Store.ImportMessage(ctx, bot, m) })
	case "event":
		var ev platform.Event
		if err := decodeInto(e, &ev); err != nil {
			return err
		}
		cur, err := s.Store.GetEvent(ctx, bot, ev.ID)
		// CreateEvent stores it without delivering it: a past event does
		// not run again. An existing event is compared without its
		// status and failure reason: they move on their own (an event
		// exported while pending is processed afterwards), and that is
		// no conflict.
		return createOrCompare(o, dry, cur, err, e.Data, func() error { return s.Store.CreateEvent(ctx, bot, ev) }, "status", "failureReason")
	case "task":
		var t platform.Task
		if err := decodeInto(e, &t); err != nil {
			return err
		}
		cur, err := s.Store.GetTask(ctx, bot, t.ID)
		return createOrCompare(o, dry, cur, err, e.Data, func() error { return s.Store.ImportTask(ctx, bot, t) })
	case "workflow":
		var w platform.Workflow
		if err := decodeInto(e, &w); err != nil {
			return err
		}
		cur, err := s.Store.GetWorkflow(ctx, bot, w.ID)
		return createOrCompare(o, dry, cur, err, e.Data, func() error { return s.Store.ImportWorkflow(ctx, bot, w) })
	case "state":
		var st platform.State
		if err := decodeInto(e, &st); err != nil {
			return err
		}
		owner := bot
		switch st.Type {
		case "user":
			owner = st.UserID
		case "conversation":
			owner = st.ConversationID
		}
		k := platform.StateKey{BotID: bot, Type: st.Type, OwnerID: owner, Name: st.Name}
		cur, err := s.Store.GetState(ctx, k)
		st.BotID = bot
		return createOrCompare(o, dry, cur, err, e.Data, func() error {
			_, err := s.Store.WriteState(ctx, k, func(old *platform.State) (*platform.State, error) {
				if old != nil {
					return old, nil
				}
				return &st, nil
			})
			return err
		})
	}
	o.Outcome, o.Message = outSkipped, fmt.Sprintf("kind %q is not one this platform imports", e.Kind)
	return nil
}

// createOrCompare: when the record exists (err nil), compare it; when it
// does not, create it (or, dry, say it would be).
func createOrCompare(o *importOutcome, dry bool, cur any, err error, archived json.RawMessage, create func() error, ignore ...string) error {
	if err == nil {
		compare(o, cur, archived, ignore...)
		return nil
	}
	if !isNotFound(err) {
		return err
	}
	o.Outcome = outCreated
	if dry {
		return nil
	}
	if err := create(); err != nil {
		if isType(err, platform.ErrAlreadyExists) || isType(err, platform.ErrRelationConflict) {
			o.Outcome, o.Message = outConflict, err.Error()
			return nil
		}
		return err
	}
	return nil
}

func (s *server) importMember(c *call, e importEntry, dry bool, o *importOutcome) error {
	var m platform.Member
	if err := decodeInto(e, &m); err != nil {
		return err
	}
	acct, found, err := s.Store.AccountByEmail(c.ctx, m.Email)
	if err != nil {
		return err
	}
	if !found {
		o.Outcome, o.Message = outSkipped, "no account of "+m.Email+" on this platform: invite them (createWorkspaceMember)"
		return nil
	}
	cur, ok, err := s.Store.GetMember(c.ctx, c.workspaceID, acct.ID)
	if err != nil {
		return err
	}
	if ok {
		if cur.Role == m.Role {
			o.Outcome = outUnchanged
		} else {
			o.Outcome, o.Message = outConflict, fmt.Sprintf("%s is a member as %s here, %s in the archive; left as it is", m.Email, cur.Role, m.Role)
		}
		return nil
	}
	o.Outcome = outCreated
	if dry {
		return nil
	}
	_, err = s.Store.AddMember(c.ctx, c.workspaceID, acct, m.Role)
	return err
}

// importBot creates the bot with its id and applies its bot JSON as
// publishFromBotJson does (code deployed, installations registered,
// schedules written). An existing bot is compared by its bot JSON.
func (s *server) importBot(c *call, bots map[string]*call, e importEntry, dry bool, o *importOutcome) error {
	var in struct {
		Bot struct {
			ID        string `json:"id"`
			Name      string `json:"name"`
			CreatedAt string `json:"createdAt"`
			UpdatedAt string `json:"updatedAt"`
		} `json:"bot"`
		BotJSON json.RawMessage `json:"botJson"`
	}
	if err := decodeInto(e, &in); err != nil {
		return err
	}
	id := in.Bot.ID
	if !platform.HasPrefix(id, platform.PrefixBot) {
		o.Outcome, o.Message = outFailed, fmt.Sprintf("bot id %q is not an id of this platform (%s and 26 characters, as Botpress Cloud's are not): import with --remap", id, platform.PrefixBot)
		return nil
	}
	cur, err := s.Store.GetBot(c.ctx, id)
	if err == nil {
		if cur.WorkspaceID != c.workspaceID {
			o.Outcome, o.Message = outConflict, "bot "+id+" exists in another workspace of this platform: import with --remap"
			return nil
		}
		j, err := s.exportBot(c, cur.Bot)
		if err != nil {
			return err
		}
		compare(o, blankConfigs(marshalled(j)), blankConfigs(in.BotJSON), "format")
		return nil
	}
	if !isNotFound(err) {
		return err
	}
	o.Outcome = outCreated
	if dry {
		return nil
	}
	b := platform.Bot{
		ID: id, CreatedAt: in.Bot.CreatedAt, UpdatedAt: in.Bot.UpdatedAt, WorkspaceID: c.workspaceID,
		SigningSecret: platform.NewSecret(), Integrations: map[string]json.RawMessage{}, Plugins: map[string]json.RawMessage{},
		States: map[string]json.RawMessage{}, Events: map[string]json.RawMessage{}, RecurringEvents: map[string]json.RawMessage{},
		Actions: map[string]json.RawMessage{}, Tags: map[string]string{}, Name: in.Bot.Name, CreatedBy: c.principal.AccountID,
		Status: "active", Medias: []platform.Media{}, Installs: map[string]platform.IntegrationInstance{},
		Subscriptions: json.RawMessage(`{"events":null}`),
	}
	if b.CreatedAt == "" {
		b.CreatedAt = platform.Now()
	}
	if b.UpdatedAt == "" {
		b.UpdatedAt = b.CreatedAt
	}
	if err := s.Store.CreateBot(c.ctx, b); err != nil {
		return err
	}
	if len(in.BotJSON) == 0 || string(in.BotJSON) == "null" {
		o.Message = "created without a definition: the archive has no bot JSON"
		return nil
	}
	if _, err := s.publishJSON(c, id, in.BotJSON, "botJson"); err != nil {
		o.Outcome = outFailed
		o.Message = "bot created, its definition not applied: " + err.Error()
		return nil
	}
	delete(bots, id)
	return nil
}

// blankConfigs is a bot JSON with its installations' configurations
// emptied (an archive carries them apart, as secrets, or not at all).
func blankConfigs(raw []byte) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return raw
	}
	var ints map[string]map[string]json.RawMessage
	if json.Unmarshal(m["integrations"], &ints) == nil {
		for _, in := range ints {
			in["configuration"] = json.RawMessage(`{}`)
		}
		m["integrations"] = marshalled(ints)
	}
	return marshalled(m)
}

// importSecret applies installations' configurations (decrypted by the
// importer) to the bot, as updateBot would.
func (s *server) importSecret(c *call, e importEntry, dry bool, o *importOutcome) error {
	var in struct {
		Integrations map[string]json.RawMessage `json:"integrations"`
	}
	if err := decodeInto(e, &in); err != nil {
		return err
	}
	j, err := s.exportBot(c, c.bot.Bot)
	if err != nil {
		return err
	}
	patch := map[string]json.RawMessage{}
	for alias, cfg := range in.Integrations {
		cur, ok := j.Integrations[alias]
		if !ok {
			o.Conflicts = append(o.Conflicts, alias+": not installed")
			continue
		}
		if sameJSON(cur.Configuration, cfg) {
			o.Unchanged++
			continue
		}
		if len(cur.Configuration) > 0 && string(cur.Configuration) != "{}" && string(cur.Configuration) != "null" {
			o.Conflicts = append(o.Conflicts, alias+": configured differently here; left as it is")
			continue
		}
		patch[alias] = marshalled(map[string]any{"integrationId": cur.IntegrationID, "enabled": cur.Enabled, "configuration": cfg})
		o.Created++
	}
	o.Outcome = outUnchanged
	if o.Created > 0 {
		o.Outcome = outCreated
	}
	if len(o.Conflicts) > 0 {
		o.Outcome = outConflict
	}
	if dry || len(patch) == 0 {
		return nil
	}
	_, err = s.updateBotWith(c, c.bot.ID, &updateBotBody{Integrations: patch})
	return err
}

func (s *server) importArchiveTable(c *call, e importEntry, dry bool, o *importOutcome) error {
	var t platform.Table
	if err := decodeInto(e, &t); err != nil {
		return err
	}
	cur, err := s.Store.GetTable(c.ctx, c.bot.ID, t.Name)
	if err == nil {
		compare(o, wireTable(cur.Table), e.Data)
		return nil
	}
	if !isNotFound(err) {
		return err
	}
	o.Outcome = outCreated
	factor := float64(t.Factor)
	key := json.RawMessage(marshalled(t.KeyColumn))
	if t.KeyColumn == "" {
		key = nil
	}
	nt, st, err := newTable(t.Name, tableInput{Factor: &factor, Frozen: &t.Frozen, KeyColumn: key, Schema: t.Schema, Tags: t.Tags, IsComputeEnabled: &t.IsComputeEnabled})
	if err != nil {
		return err
	}
	if dry {
		return nil
	}
	nt.ID, nt.CreatedAt, nt.UpdatedAt = t.ID, t.CreatedAt, t.UpdatedAt
	return s.Store.CreateTable(c.ctx, c.bot.ID, nt, st, 0, 0, 0)
}

// importRows writes a page of a table's rows with their ids: rows already
// there are compared, the others inserted as createTableRows would
// (validated, counted, indexed, key values claimed), then the table's id
// counter is moved past the largest id.
func (s *server) importRows(c *call, e importEntry, dry bool, o *importOutcome) error {
	var in struct {
		Table string                       `json:"table"`
		Rows  []map[string]json.RawMessage `json:"rows"`
	}
	if err := decodeInto(e, &in); err != nil {
		return err
	}
	for attempt := 0; attempt < tableRetries; attempt++ {
		rec, schema, err := s.loadTable(c, in.Table)
		if err != nil {
			if dry && isNotFound(err) {
				o.Outcome, o.Created = outCreated, len(in.Rows)
				return nil
			}
			return err
		}
		ids := make([]int64, len(in.Rows))
		for i, r := range in.Rows {
			id, ok, err := rowID(r)
			if err != nil || !ok {
				return platform.Invalid("entry %d: rows[%d] has no id", e.Seq, i)
			}
			ids[i] = id
		}
		have, err := s.Store.GetRows(c.ctx, rec.RowSet(), ids)
		if err != nil {
			return err
		}
		*o = importOutcome{Seq: o.Seq, Kind: o.Kind, ID: o.ID}
		var write []platform.TableRow
		var stale []bool
		var maxID int64
		col := keyColumn(rec, schema)
		for i, raw := range in.Rows {
			if cur, ok := have[ids[i]]; ok {
				if sameJSON(marshalled(schema.Wire(cur.TableRow)), marshalled(raw)) {
					o.Unchanged++
				} else {
					o.Conflicts = append(o.Conflicts, fmt.Sprintf("row %d differs; left as it is", ids[i]))
				}
				continue
			}
			vals := map[string]json.RawMessage{}
			var createdAt, updatedAt string
			for k, v := range raw {
				switch k {
				case "id":
				case "createdAt":
					json.Unmarshal(v, &createdAt)
				case "updatedAt":
					json.Unmarshal(v, &updatedAt)
				default:
					if !strings.HasPrefix(k, "$") {
						vals[k] = v
					}
				}
			}
			cv, _, err := schema.CheckRow(vals, true)
			if err != nil {
				o.Conflicts = append(o.Conflicts, fmt.Sprintf("row %d: %v", ids[i], err))
				continue
			}
			row := schema.NewRow(ids[i], createdAt, cv)
			if updatedAt != "" {
				row.UpdatedAt = updatedAt
			}
			if col != nil && !dry {
				if v := tables.KeyValue(row.Values[col.ID]); v != "" {
					owner, err := s.claimKey(c, rec, col, v, row.ID)
					if err != nil {
						return err
					}
					if owner != row.ID {
						o.Conflicts = append(o.Conflicts, fmt.Sprintf("row %d: key %s is held by row %d", ids[i], v, owner))
						continue
					}
				}
			}
			write = append(write, row)
			stale = append(stale, schema.IsStale(row))
			maxID = max(maxID, row.ID)
		}
		o.Created = len(write)
		o.Outcome = outUnchanged
		if o.Created > 0 {
			o.Outcome = outCreated
		}
		if len(o.Conflicts) > 0 {
			o.Outcome = outConflict
		}
		if dry || len(write) == 0 {
			return nil
		}
		if maxID > rec.NextID {
			// The id counter first: a row created meanwhile through the API
			// gets an id past the imported ones.
			if _, err := s.Store.ReserveRowIDs(c.ctx, rec, maxID-rec.NextID); err != nil {
				if errors.Is(err, dynamo.ErrVersionConflict) {
					continue
				}
				return err
			}
			if rec, _, err = s.loadTable(c, in.Table); err != nil {
				return err
			}
		}
		var keys [][]platform.TableIndexKey
		if keysOf := indexKeys(rec, schema); keysOf != nil {
			keys = make([][]platform.TableIndexKey, len(write))
			for k := range write {
				keys[k] = keysOf(&write[k])
			}
		}
		err = s.Store.InsertRows(c.ctx, rec, write, stale, keys)
		if errors.Is(err, dynamo.ErrVersionConflict) {
			continue
		}
		return err
	}
	return platform.Errorf(platform.ErrResourceLocked, "table %q keeps changing concurrently; try again", in.Table)
}

// importFile writes a file's record with its id, pending, and answers
// where its contents go; a fileComplete entry then verifies and indexes
// them as an upload's completion does.
func (s *server) importFile(c *call, e importEntry, dry bool, o *importOutcome) error {
	var f platform.File
	if err := decodeInto(e, &f); err != nil {
		return err
	}
	cur, err := s.Store.GetFile(c.ctx, f.ID)
	if err == nil {
		if cur.BotID != c.bot.ID || cur.Key != f.Key || cur.Size != f.Size {
			o.Outcome, o.Message = outConflict, "a different file with this id exists; left as it is"
			return nil
		}
		if cur.Status == platform.FileUploadPending && !dry {
			// An import interrupted between the record and its contents.
			o.Outcome = outCreated
			o.UploadURL, err = s.Files.PresignPut(platform.WithOrigin(c.ctx, origin(c.Request)), cur.ObjectKey(), cur.ContentType, cur.Size, files.UploadURLTTL)
			return err
		}
		o.Outcome = outUnchanged
		return nil
	}
	if !isNotFound(err) {
		return err
	}
	if _, err := s.Store.GetFileByKey(c.ctx, c.bot.ID, f.Key); err == nil {
		o.Outcome, o.Message = outConflict, "another file has key "+f.Key+" here; left as it is"
		return nil
	}
	o.Outcome = outCreated
	if dry {
		return nil
	}
	rec := platform.FileRecord{File: f, Generation: platform.NewID("")}
	rec.BotID, rec.URL, rec.Status, rec.FailedStatusReason = c.bot.ID, "", platform.FileUploadPending, ""
	if rec.Tags == nil {
		rec.Tags = map[string]string{}
	}
	if f.Index {
		rec.Indexing = json.RawMessage(`{}`)
	}
	if err := s.Store.ImportFiles(c.ctx, []platform.FileRecord{rec}); err != nil {
		return err
	}
	o.UploadURL, err = s.Files.PresignPut(platform.WithOrigin(c.ctx, origin(c.Request)), rec.ObjectKey(), rec.ContentType, rec.Size, files.UploadURLTTL)
	return err
}

// botKinds are the kinds of entries belonging to a bot.
var botKinds = map[string]bool{
	"secret": true, "table": true, "rows": true, "file": true, "fileComplete": true, "knowledgeBase": true, "user": true,
	"conversation": true, "participants": true, "message": true, "event": true, "task": true, "workflow": true, "state": true,
}

// importPrefixes are the id prefixes of the kinds written with their ids.
var importPrefixes = map[string]string{
	"table": platform.PrefixTable, "knowledgeBase": platform.PrefixKnowledgeBase, "file": platform.PrefixFile,
	"user": platform.PrefixUser, "conversation": platform.PrefixConversation, "message": platform.PrefixMessage,
	"event": platform.PrefixEvent, "task": platform.PrefixTask, "workflow": platform.PrefixWorkflow,
}

func isType(err error, t platform.ErrorType) bool {
	var pe *platform.Error
	return errors.As(err, &pe) && pe.Type == t
}

func isNotFound(err error) bool { return isType(err, platform.ErrResourceNotFound) }
