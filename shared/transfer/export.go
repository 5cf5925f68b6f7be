package transfer

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/botforge/platform/shared/archive"
)

// Export is what to export and where.
type Export struct {
	Client    *Client
	Workspace string
	// Bot, set, exports that bot only (and not the workspace's members).
	Bot string
	// Out is the archive's path; Out+".journal" holds an interrupted
	// export's progress, and a run finding it resumes.
	Out string
	// Passphrase, set, exports integrations' configurations encrypted
	// with it; empty, they are left out (and the report says so).
	Passphrase string
	// Progress, when set, is told after each page.
	Progress func(Progress)
	// PageSize of table rows (at most 1000).
	PageSize int
}

// Progress is how far a run has got.
type Progress struct {
	Entries int64
	Bytes   int64
	Unit    string
	// Records counts records (a table's rows one by one, files' contents
	// not) since this run started: the console's bar (jobs.go).
	Records int64
}

// Report is what a finished export did.
type Report struct {
	Entries int64 `json:"entries"`
	Bytes   int64 `json:"bytes"`
	Resumed bool  `json:"resumed"`
	// Notes: what the source does not expose and what was left out.
	Notes []string `json:"notes"`
}

// chunk is the size of a file's contents per blob entry (before base64).
const chunk = 512 << 10

type exporter struct {
	Export
	w       *archive.Writer
	j       *archive.Journal // the interrupted run's, or nil
	units   int
	sealer  *archive.Sealer
	notes   []string
	noted   map[string]bool
	journal string
	hdr     *archive.Header
	records int64
}

// ErrSourceChanged: a resumed export found the source's records in another
// order than the interrupted run did.
var ErrSourceChanged = errors.New("the source changed since the interrupted export (its units of work differ); delete the archive and its journal and export again")

// Run exports, resuming an interrupted run of the same Out.
func (e Export) Run(ctx context.Context) (Report, error) {
	if e.PageSize <= 0 || e.PageSize > 1000 {
		e.PageSize = 1000
	}
	x := &exporter{Export: e, journal: e.Out + ".journal", noted: map[string]bool{}}
	j, err := archive.LoadJournal(x.journal)
	if err != nil {
		return Report{}, fmt.Errorf("journal: %w", err)
	}
	var h archive.Header
	if j != nil {
		x.j = j
		h = *j.Header
		if x.w, err = archive.Resume(e.Out, j.Offset, j.Seq); err != nil {
			return Report{}, err
		}
	} else {
		h = archive.Header{CreatedAt: time.Now().UTC().Format(time.RFC3339Nano),
			Source: archive.Source{APIURL: e.Client.URL, WorkspaceID: e.Workspace, BotID: e.Bot}}
		if e.Passphrase != "" {
			if x.sealer, h.Secrets, err = archive.NewSecrets(e.Passphrase); err != nil {
				return Report{}, err
			}
		}
		if x.w, err = archive.Create(e.Out, h); err != nil {
			return Report{}, err
		}
		off, seq, err := x.w.Commit()
		if err != nil {
			return Report{}, err
		}
		if err := (&archive.Journal{Offset: off, Seq: seq, Header: &h}).Save(x.journal); err != nil {
			return Report{}, err
		}
	}
	if h.Secrets != nil && x.sealer == nil {
		if e.Passphrase == "" {
			return Report{}, errors.New("this interrupted export keeps secrets: resume it with the same --passphrase")
		}
		if x.sealer, err = archive.OpenSecrets(e.Passphrase, h.Secrets); err != nil {
			return Report{}, err
		}
	}
	x.hdr = &h
	if err := x.all(ctx); err != nil {
		x.w.Close()
		return Report{}, err
	}
	if err := x.w.Finish(x.notes); err != nil {
		return Report{}, err
	}
	os.Remove(x.journal)
	st, _ := os.Stat(e.Out)
	var size int64
	if st != nil {
		size = st.Size()
	}
	return Report{Entries: x.w.Seq(), Bytes: size, Resumed: j != nil, Notes: x.notes}, nil
}

func (x *exporter) note(s string) {
	if !x.noted[s] {
		x.noted[s] = true
		x.notes = append(x.notes, s)
	}
}

// unit runs one unit of work page by page: fn emits a page's entries and
// answers the cursor of the next page ("" : done). After each page the
// archive is synced and the journal saved, so an interruption loses at
// most the page in flight, which a resumed run cuts off and redoes. Units
// an interrupted run finished are skipped: they come in the same order
// on every run (the source's list orders), and a unit named differently
// from the journal's is ErrSourceChanged.
func (x *exporter) unit(ctx context.Context, key string, fn func(cursor string) (string, error)) error {
	idx := x.units
	x.units++
	cursor := ""
	if x.j != nil {
		switch {
		case idx < x.j.Units:
			return nil
		case idx == x.j.Units && x.j.Unit != "":
			if x.j.Unit != key {
				return fmt.Errorf("%w (was at %q, now %q)", ErrSourceChanged, x.j.Unit, key)
			}
			cursor = x.j.Cursor
		}
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		next, err := fn(cursor)
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		off, seq, err := x.w.Commit()
		if err != nil {
			return err
		}
		jr := &archive.Journal{Offset: off, Seq: seq, Units: idx, Unit: key, Cursor: next, Header: x.hdr}
		if next == "" {
			jr.Units, jr.Unit = idx+1, ""
		}
		if err := jr.Save(x.journal); err != nil {
			return err
		}
		if x.Progress != nil {
			x.Progress(Progress{Entries: seq, Bytes: off, Unit: key, Records: x.records})
		}
		if next == "" {
			return nil
		}
		cursor = next
	}
}

func (x *exporter) add(kind, bot, id string, v any) error {
	if kind != "rows" && kind != "blob" {
		x.records++ // rows are counted by tablePage
	}
	raw, ok := v.(json.RawMessage)
	if !ok {
		var err error
		if raw, err = json.Marshal(v); err != nil {
			return err
		}
	}
	return x.w.Add(kind, bot, id, raw)
}

// ids reads the id of each raw record.
func idOf(raw json.RawMessage) string {
	var v struct {
		ID json.RawMessage `json:"id"`
	}
	json.Unmarshal(raw, &v)
	var s string
	if json.Unmarshal(v.ID, &s) == nil {
		return s
	}
	return string(v.ID)
}

func (x *exporter) all(ctx context.Context) error {
	ws := headers{ws: x.Workspace}
	if x.Bot == "" {
		if err := x.unit(ctx, "workspace", func(string) (string, error) {
			var w struct {
				Workspace json.RawMessage `json:"workspace"`
			}
			var raw json.RawMessage
			if err := x.Client.do(ctx, ws, "GET", "/v1/admin/workspaces/"+url.PathEscape(x.Workspace), nil, &raw); err != nil {
				return "", err
			}
			if json.Unmarshal(raw, &w) == nil && w.Workspace != nil {
				raw = w.Workspace
			}
			if err := x.add("workspace", "", x.Workspace, raw); err != nil {
				return "", err
			}
			return "", x.list(ctx, ws, "/v1/admin/workspace-members", "members", func(r json.RawMessage) error {
				return x.add("member", "", idOf(r), r)
			})
		}); err != nil {
			return err
		}
	} else {
		x.note("workspace members and roles: a one-bot archive does not carry them (export the workspace to have them)")
	}
	bots := []string{x.Bot}
	if x.Bot == "" {
		bots = nil
		if err := x.list(ctx, ws, "/v1/admin/bots", "bots", func(r json.RawMessage) error {
			bots = append(bots, idOf(r))
			return nil
		}); err != nil {
			return err
		}
	}
	for _, b := range bots {
		if err := x.bot(ctx, b); err != nil {
			return err
		}
	}
	x.note("not exposed by the API, so not in the archive: bot API keys and personal access tokens (secrets the API never shows again), logs, analytics and usage, bot versions' history, integration definitions (an installed integration is named by id and must exist where the archive is imported), Studio-built code not deployed as a bundle, files' passages and vectors (the importing platform indexes files again)")
	return nil
}

// list calls a list operation through all its pages.
func (x *exporter) list(ctx context.Context, h headers, path, field string, fn func(json.RawMessage) error) error {
	token := ""
	for {
		var out map[string]json.RawMessage
		if err := x.Client.do(ctx, h, "GET", withToken(path, token), nil, &out); err != nil {
			return err
		}
		var items []json.RawMessage
		json.Unmarshal(out[field], &items)
		for _, it := range items {
			if err := fn(it); err != nil {
				return err
			}
		}
		var p page
		if m, ok := out["meta"]; ok {
			json.Unmarshal(m, &p.Meta)
		}
		if p.Meta.NextToken == "" {
			return nil
		}
		token = p.Meta.NextToken
	}
}

// listPage calls one page of a list operation (a unit's page).
func (x *exporter) listPage(ctx context.Context, h headers, path, field, token string, fn func(json.RawMessage) error) (string, error) {
	var out map[string]json.RawMessage
	if err := x.Client.do(ctx, h, "GET", withToken(path, token), nil, &out); err != nil {
		return "", err
	}
	var items []json.RawMessage
	json.Unmarshal(out[field], &items)
	for _, it := range items {
		if err := fn(it); err != nil {
			return "", err
		}
	}
	var p page
	if m, ok := out["meta"]; ok {
		json.Unmarshal(m, &p.Meta)
	}
	return p.Meta.NextToken, nil
}

// stateNames are a bot's declared states by type (its definition's states).
type stateNames map[string][]string

func (x *exporter) bot(ctx context.Context, id string) error {
	adm := headers{ws: x.Workspace}
	bh := headers{ws: x.Workspace, bot: id}
	names := stateNames{}
	// The definition first: getBot and getBotJson (the deployed code, the
	// installations with their configuration).
	var def struct {
		Bot json.RawMessage `json:"bot"`
	}
	if err := x.Client.do(ctx, adm, "GET", "/v1/admin/bots/"+url.PathEscape(id), nil, &def); err != nil {
		return err
	}
	var states struct {
		States map[string]struct {
			Type string `json:"type"`
		} `json:"states"`
	}
	json.Unmarshal(def.Bot, &states)
	for n, s := range states.States {
		names[s.Type] = append(names[s.Type], n)
	}
	for _, l := range names {
		sortStrings(l)
	}
	if err := x.unit(ctx, "bot:"+id, func(string) (string, error) {
		var bj map[string]json.RawMessage
		if err := x.Client.do(ctx, adm, "GET", "/v1/admin/bots/"+url.PathEscape(id)+"/bot-json", nil, &bj); err != nil {
			if NotFound(err) {
				x.note("getBotJson is not served by the source: deployed code and installations' configuration are not in the archive")
			} else {
				return "", err
			}
		}
		sealed, err := x.secrets(bj)
		if err != nil {
			return "", err
		}
		if err := x.add("bot", id, id, map[string]any{"bot": def.Bot, "botJson": bj}); err != nil {
			return "", err
		}
		if len(sealed) > 0 {
			if err := x.add("secret", id, id, map[string]any{"integrations": sealed}); err != nil {
				return "", err
			}
		}
		for _, n := range names["bot"] {
			if err := x.state(ctx, bh, id, "bot", id, n); err != nil {
				return "", err
			}
		}
		return "", x.list(ctx, adm, "/v1/admin/bots/"+url.PathEscape(id)+"/issues", "issues", func(r json.RawMessage) error {
			return x.add("issue", id, idOf(r), r)
		})
	}); err != nil {
		return err
	}
	// Tables: each one a unit, its rows paged by id.
	var tables []string
	if err := x.list(ctx, bh, "/v1/tables", "tables", func(r json.RawMessage) error {
		var t struct{ Name string }
		json.Unmarshal(r, &t)
		tables = append(tables, t.Name)
		return nil
	}); err != nil {
		return err
	}
	for _, t := range tables {
		if err := x.unit(ctx, "table:"+id+":"+t, func(cursor string) (string, error) { return x.tablePage(ctx, bh, id, t, cursor) }); err != nil {
			return err
		}
	}
	if err := x.unit(ctx, "kbs:"+id, func(cursor string) (string, error) {
		return x.listPage(ctx, bh, "/v1/files/knowledge-bases", "knowledgeBases", cursor, func(r json.RawMessage) error {
			return x.add("knowledgeBase", id, idOf(r), r)
		})
	}); err != nil {
		return err
	}
	if err := x.unit(ctx, "files:"+id, func(cursor string) (string, error) {
		return x.listPage(ctx, bh, "/v1/files?pageSize=20", "files", cursor, func(r json.RawMessage) error { return x.file(ctx, bh, id, r) })
	}); err != nil {
		return err
	}
	if err := x.unit(ctx, "users:"+id, func(cursor string) (string, error) {
		return x.listPage(ctx, bh, "/v1/chat/users", "users", cursor, func(r json.RawMessage) error {
			uid := idOf(r)
			if err := x.add("user", id, uid, r); err != nil {
				return err
			}
			for _, n := range names["user"] {
				if err := x.state(ctx, bh, id, "user", uid, n); err != nil {
					return err
				}
			}
			return nil
		})
	}); err != nil {
		return err
	}
	var convs []string
	if err := x.unit(ctx, "conversations:"+id, func(cursor string) (string, error) {
		return x.listPage(ctx, bh, "/v1/chat/conversations", "conversations", cursor, func(r json.RawMessage) error {
			cid := idOf(r)
			if err := x.add("conversation", id, cid, r); err != nil {
				return err
			}
			var ps []string
			if err := x.list(ctx, bh, "/v1/chat/conversations/"+url.PathEscape(cid)+"/participants", "participants", func(p json.RawMessage) error {
				ps = append(ps, idOf(p))
				return nil
			}); err != nil {
				return err
			}
			if err := x.add("participants", id, cid, map[string]any{"conversationId": cid, "userIds": ps}); err != nil {
				return err
			}
			for _, n := range names["conversation"] {
				if err := x.state(ctx, bh, id, "conversation", cid, n); err != nil {
					return err
				}
			}
			return nil
		})
	}); err != nil {
		return err
	}
	// The conversations again (no entries): each one's messages is a unit.
	if err := x.list(ctx, bh, "/v1/chat/conversations", "conversations", func(r json.RawMessage) error {
		convs = append(convs, idOf(r))
		return nil
	}); err != nil {
		return err
	}
	for _, cid := range convs {
		if err := x.unit(ctx, "messages:"+id+":"+cid, func(cursor string) (string, error) {
			return x.listPage(ctx, bh, "/v1/chat/messages?conversationId="+url.QueryEscape(cid), "messages", cursor, func(r json.RawMessage) error {
				return x.add("message", id, idOf(r), r)
			})
		}); err != nil {
			return err
		}
	}
	for _, k := range []struct{ kind, path, field string }{
		{"event", "/v1/chat/events", "events"},
		{"task", "/v1/chat/tasks", "tasks"},
		{"workflow", "/v1/chat/workflows", "workflows"},
	} {
		if err := x.unit(ctx, k.field+":"+id, func(cursor string) (string, error) {
			return x.listPage(ctx, bh, k.path, k.field, cursor, func(r json.RawMessage) error {
				return x.add(k.kind, id, idOf(r), r)
			})
		}); err != nil {
			return err
		}
	}
	return nil
}

// state exports one state if it exists.
func (x *exporter) state(ctx context.Context, h headers, bot, typ, owner, name string) error {
	var out struct {
		State json.RawMessage `json:"state"`
	}
	err := x.Client.do(ctx, h, "GET", "/v1/chat/states/"+typ+"/"+url.PathEscape(owner)+"/"+url.PathEscape(name), nil, &out)
	if NotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return x.add("state", bot, typ+"/"+owner+"/"+name, out.State)
}

// secrets moves installations' configurations out of the bot JSON and
// answers them sealed (with a passphrase; without one, they are dropped).
func (x *exporter) secrets(bj map[string]json.RawMessage) (map[string]json.RawMessage, error) {
	var ints map[string]map[string]json.RawMessage
	if bj == nil || json.Unmarshal(bj["integrations"], &ints) != nil || len(ints) == 0 {
		return nil, nil
	}
	sealed := map[string]json.RawMessage{}
	for alias, in := range ints {
		if c, ok := in["configuration"]; ok && string(c) != "{}" && string(c) != "null" {
			if x.sealer != nil {
				s, err := x.sealer.SealJSON(c)
				if err != nil {
					return nil, err
				}
				sealed[alias] = s
			} else {
				x.note("installed integrations' configurations (they may hold secrets) are left out: export with --passphrase to carry them encrypted")
			}
		}
		in["configuration"] = json.RawMessage(`{}`)
	}
	raw, _ := json.Marshal(ints)
	bj["integrations"] = raw
	return sealed, nil
}

// tablePage exports a page of a table's rows after row id cursor (the
// table itself on the first page).
func (x *exporter) tablePage(ctx context.Context, h headers, bot, name, cursor string) (string, error) {
	p := "/v1/tables/" + url.PathEscape(name)
	if cursor == "" {
		var t struct {
			Table json.RawMessage `json:"table"`
		}
		if err := x.Client.do(ctx, h, "GET", p, nil, &t); err != nil {
			return "", err
		}
		if err := x.add("table", bot, name, t.Table); err != nil {
			return "", err
		}
	}
	after, _ := strconv.ParseInt(cursor, 10, 64)
	body := map[string]any{"limit": x.PageSize, "orderBy": "id", "orderDirection": "asc", "filter": map[string]any{"id": map[string]any{"$gt": after}}}
	var out struct {
		Rows []json.RawMessage `json:"rows"`
	}
	if err := x.Client.do(ctx, h, "POST", p+"/rows/find", body, &out); err != nil {
		return "", err
	}
	if len(out.Rows) == 0 {
		return "", nil
	}
	if err := x.add("rows", bot, name, map[string]any{"table": name, "rows": out.Rows}); err != nil {
		return "", err
	}
	x.records += int64(len(out.Rows))
	last := idOf(out.Rows[len(out.Rows)-1])
	if len(out.Rows) < x.PageSize {
		return "", nil
	}
	return last, nil
}

// file exports a file's record and its contents in blob entries.
func (x *exporter) file(ctx context.Context, h headers, bot string, r json.RawMessage) error {
	fid := idOf(r)
	var got struct {
		File json.RawMessage `json:"file"`
	}
	if err := x.Client.do(ctx, h, "GET", "/v1/files/"+url.PathEscape(fid), nil, &got); err != nil {
		return err
	}
	if err := x.add("file", bot, fid, got.File); err != nil {
		return err
	}
	var f struct {
		URL    string `json:"url"`
		Status string `json:"status"`
		Size   int64  `json:"size"`
	}
	json.Unmarshal(got.File, &f)
	if f.URL == "" || f.Status == "upload_pending" || f.Status == "upload_failed" {
		return nil
	}
	return x.Client.download(ctx, f.URL, func(body io.Reader) error {
		buf := make([]byte, chunk)
		var off int64
		for {
			n, err := io.ReadFull(body, buf)
			if n > 0 {
				if e := x.add("blob", bot, fid, map[string]any{"offset": off, "data": base64.StdEncoding.EncodeToString(buf[:n])}); e != nil {
					return e
				}
				off += int64(n)
			}
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return nil
			}
			if err != nil {
				return err
			}
		}
	})
}
