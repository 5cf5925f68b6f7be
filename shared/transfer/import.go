package transfer

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/botforge/platform/shared/archive"
	"github.com/botforge/platform/shared/platform"
)

// Import is what to import and where: the archive In into workspace
// Workspace of the platform Client calls.
type Import struct {
	Client    *Client
	Workspace string
	In        string
	// Passphrase opens the archive's secrets (installations'
	// configurations); empty, they are not imported.
	Passphrase string
	// DryRun says what would change and changes nothing.
	DryRun bool
	// Remap gives every record a new id (references follow), so an
	// archive can be imported beside its source; ids are kept otherwise.
	Remap bool
	// ChunkBytes caps one import call's body (default 4 MiB: within a
	// Lambda request).
	ChunkBytes int
	Progress   func(Progress)
}

// ImportReport counts what became of the archive's entries (a rows entry
// counts its rows), and lists the conflicts and what was skipped.
type ImportReport struct {
	Entries   int64    `json:"entries"`
	Created   int      `json:"created"`
	Unchanged int      `json:"unchanged"`
	Conflicts int      `json:"conflicts"`
	Skipped   int      `json:"skipped"`
	Failed    int      `json:"failed"`
	Resumed   bool     `json:"resumed"`
	DryRun    bool     `json:"dryRun"`
	Messages  []string `json:"messages"`
}

// outcome is the import operation's answer per entry.
type outcome struct {
	Seq       int64    `json:"seq"`
	Kind      string   `json:"kind"`
	ID        string   `json:"id"`
	Outcome   string   `json:"outcome"`
	Message   string   `json:"message"`
	Created   int      `json:"created"`
	Unchanged int      `json:"unchanged"`
	Conflicts []string `json:"conflicts"`
	UploadURL string   `json:"uploadUrl"`
}

type importer struct {
	Import
	rd      *archive.Reader
	peeked  *archive.Entry
	sealer  *archive.Sealer
	rep     ImportReport
	batch   []archive.Entry
	size    int
	journal string
	done    int64 // the journal's last applied entry
	ids     map[string]string
}

const maxMessages = 200

// Run imports the archive, resuming after the last entry an interrupted
// run (of the same archive, not a dry run) applied.
func (im Import) Run(ctx context.Context) (ImportReport, error) {
	if im.ChunkBytes <= 0 {
		im.ChunkBytes = 4 << 20
	}
	f, err := os.Open(im.In)
	if err != nil {
		return ImportReport{}, err
	}
	defer f.Close()
	x := &importer{Import: im, journal: im.In + ".import-journal", ids: map[string]string{}}
	x.rep.DryRun = im.DryRun
	if x.rd, err = archive.NewReader(f); err != nil {
		return ImportReport{}, err
	}
	if h := x.rd.Header; h.Secrets != nil {
		if im.Passphrase != "" {
			if x.sealer, err = archive.OpenSecrets(im.Passphrase, h.Secrets); err != nil {
				return ImportReport{}, err
			}
		} else {
			x.msg("the archive's secrets (installations' configurations) are not imported: give --passphrase to import them")
		}
	}
	if !im.DryRun && !im.Remap {
		j, err := archive.LoadJournal(x.journal)
		if err != nil {
			return ImportReport{}, err
		}
		if j != nil {
			x.done, x.rep.Resumed = j.Seq, true
		}
	}
	if err := x.all(ctx); err != nil {
		return x.rep, err
	}
	if !im.DryRun {
		os.Remove(x.journal)
	}
	return x.rep, nil
}

func (x *importer) msg(s string) {
	if len(x.rep.Messages) < maxMessages {
		x.rep.Messages = append(x.rep.Messages, s)
	}
}

func (x *importer) next() (archive.Entry, error) {
	if x.peeked != nil {
		e := *x.peeked
		x.peeked = nil
		return e, nil
	}
	return x.rd.Next()
}

func (x *importer) all(ctx context.Context) error {
	for {
		e, err := x.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		x.rep.Entries++
		if e.Seq <= x.done {
			continue
		}
		if x.Remap {
			if e, err = x.remap(e); err != nil {
				return err
			}
		}
		switch e.Kind {
		case "blob":
			continue // of a file not uploaded (unchanged, a conflict, a dry run)
		case "secret":
			if x.sealer == nil {
				x.rep.Skipped++
				continue
			}
			if e, err = x.unseal(e); err != nil {
				return err
			}
		case "bot":
			if e, err = x.resolveInstalls(ctx, e); err != nil {
				return err
			}
		case "file":
			if err := x.flush(ctx); err != nil {
				return err
			}
			if err := x.file(ctx, e); err != nil {
				return err
			}
			continue
		}
		x.batch = append(x.batch, e)
		x.size += len(e.Data) + 128
		if x.size >= x.ChunkBytes || len(x.batch) >= 1000 {
			if err := x.flush(ctx); err != nil {
				return err
			}
		}
	}
	return x.flush(ctx)
}

// send calls the import operation with entries: files' at the Files
// API's (its function writes file contents on AWS), the others at the
// Admin API's.
func (x *importer) send(ctx context.Context, entries []archive.Entry) ([]outcome, error) {
	path := "/v1/admin/transfer/import"
	if len(entries) > 0 && (entries[0].Kind == "file" || entries[0].Kind == "fileComplete") {
		path = "/v1/files/transfer/import/files"
	}
	type wireEntry struct {
		Seq  int64           `json:"seq"`
		Kind string          `json:"kind"`
		Bot  string          `json:"bot,omitempty"`
		ID   string          `json:"id,omitempty"`
		Data json.RawMessage `json:"data"`
	}
	ws := make([]wireEntry, len(entries))
	for i, e := range entries {
		ws[i] = wireEntry{e.Seq, e.Kind, e.Bot, e.ID, e.Data}
		if ws[i].Data == nil {
			ws[i].Data = json.RawMessage(`{}`)
		}
	}
	var out struct {
		Results []outcome `json:"results"`
	}
	err := x.Client.do(ctx, headers{ws: x.Workspace}, "POST", path, map[string]any{"dryRun": x.DryRun, "entries": ws}, &out)
	if err != nil {
		return nil, err
	}
	for _, o := range out.Results {
		x.tally(o)
	}
	return out.Results, nil
}

func (x *importer) tally(o outcome) {
	what := o.Kind + " " + o.ID
	switch o.Outcome {
	case "created":
		x.rep.Created += max(o.Created, 1)
	case "unchanged":
		x.rep.Unchanged += max(o.Unchanged, 1)
	case "conflict":
		x.rep.Conflicts += max(len(o.Conflicts), 1)
		x.rep.Created += o.Created
		x.rep.Unchanged += o.Unchanged
		if o.Message != "" {
			x.msg("conflict: " + what + ": " + o.Message)
		}
		for _, c := range o.Conflicts {
			x.msg("conflict: " + what + ": " + c)
		}
		return
	case "skipped":
		x.rep.Skipped++
		x.msg("skipped: " + what + ": " + o.Message)
		return
	case "failed":
		x.rep.Failed++
		x.msg("failed: " + what + ": " + o.Message)
		return
	}
	if o.Kind == "bot" && o.Message != "" {
		x.msg(what + ": " + o.Message)
	}
}

// flush sends the pending entries and records them applied.
func (x *importer) flush(ctx context.Context) error {
	if len(x.batch) == 0 {
		return nil
	}
	last := x.batch[len(x.batch)-1].Seq
	if _, err := x.send(ctx, x.batch); err != nil {
		return err
	}
	x.batch, x.size = x.batch[:0], 0
	return x.applied(last)
}

func (x *importer) applied(seq int64) error {
	if x.Progress != nil {
		x.Progress(Progress{Entries: seq, Bytes: x.rd.Offset})
	}
	if x.DryRun || x.Remap {
		return nil
	}
	return (&archive.Journal{Seq: seq}).Save(x.journal)
}

// file sends a file's record; when its contents are wanted, it streams the
// following blob entries to the upload url, then completes the file.
func (x *importer) file(ctx context.Context, e archive.Entry) error {
	res, err := x.send(ctx, []archive.Entry{e})
	if err != nil {
		return err
	}
	var f struct {
		Size        int64  `json:"size"`
		ContentType string `json:"contentType"`
	}
	json.Unmarshal(e.Data, &f)
	up := ""
	if len(res) == 1 {
		up = res[0].UploadURL
	}
	last := e.Seq
	pr, pw := io.Pipe()
	errc := make(chan error, 1)
	if up != "" {
		go func() {
			req, err := http.NewRequestWithContext(ctx, "PUT", up, pr)
			if err != nil {
				pr.CloseWithError(err)
				errc <- err
				return
			}
			req.ContentLength = f.Size
			req.Header.Set("Content-Type", f.ContentType)
			resp, err := x.Client.http().Do(req)
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode >= 300 {
					err = fmt.Errorf("upload of file %s: %s %s", e.ID, resp.Status, strings.TrimSpace(string(b)))
				}
			}
			pr.CloseWithError(err)
			errc <- err
		}()
	}
	var werr error
	for {
		b, err := x.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			pw.CloseWithError(err)
			return err
		}
		if b.Kind != "blob" || b.ID != e.ID && x.ids[b.ID] != e.ID {
			x.peeked = &b
			break
		}
		x.rep.Entries++
		last = b.Seq
		if up == "" || werr != nil {
			continue
		}
		var blob struct {
			Data string `json:"data"`
		}
		if err := json.Unmarshal(b.Data, &blob); err != nil {
			return err
		}
		raw, err := base64.StdEncoding.DecodeString(blob.Data)
		if err != nil {
			return fmt.Errorf("entry %d: %w", b.Seq, err)
		}
		_, werr = pw.Write(raw)
	}
	if up == "" {
		return x.applied(last)
	}
	pw.Close()
	if err := <-errc; err != nil {
		return err
	}
	if werr != nil {
		return werr
	}
	if _, err := x.send(ctx, []archive.Entry{{Seq: last, Kind: "fileComplete", Bot: e.Bot, ID: e.ID, Data: json.RawMessage(`{}`)}}); err != nil {
		return err
	}
	return x.applied(last)
}

// unseal decrypts a secret entry for the import operation.
func (x *importer) unseal(e archive.Entry) (archive.Entry, error) {
	var in struct {
		Integrations map[string]string `json:"integrations"`
	}
	if err := json.Unmarshal(e.Data, &in); err != nil {
		return e, err
	}
	out := map[string]json.RawMessage{}
	for alias, s := range in.Integrations {
		b, err := x.sealer.Open(s)
		if err != nil {
			return e, err
		}
		out[alias] = b
	}
	raw, _ := json.Marshal(map[string]any{"integrations": out})
	e.Data = raw
	return e, nil
}

// resolveInstalls points the bot's installations at the integrations of the
// same name and version where the archive is imported, when the source's
// ids are not there (integration definitions are not in an archive).
func (x *importer) resolveInstalls(ctx context.Context, e archive.Entry) (archive.Entry, error) {
	var d struct {
		Bot     json.RawMessage            `json:"bot"`
		BotJSON map[string]json.RawMessage `json:"botJson"`
	}
	if json.Unmarshal(e.Data, &d) != nil || d.BotJSON == nil {
		return e, nil
	}
	var srcInts struct {
		Integrations map[string]struct {
			ID      string `json:"id"`
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"integrations"`
	}
	json.Unmarshal(d.Bot, &srcInts)
	var ints map[string]map[string]json.RawMessage
	if json.Unmarshal(d.BotJSON["integrations"], &ints) != nil || len(ints) == 0 {
		return e, nil
	}
	h := headers{ws: x.Workspace}
	for alias, in := range ints {
		var id string
		json.Unmarshal(in["integrationId"], &id)
		if err := x.Client.do(ctx, h, "GET", "/v1/admin/integrations/"+url.PathEscape(id), nil, nil); err == nil {
			continue
		} else if !NotFound(err) {
			return e, err
		}
		name, version := "", ""
		for _, si := range srcInts.Integrations {
			if si.ID == id {
				name, version = si.Name, si.Version
			}
		}
		if name == "" {
			x.msg(fmt.Sprintf("bot %s: installation %q: integration %s is not on this platform and the archive does not name it", e.ID, alias, id))
			delete(ints, alias)
			continue
		}
		var got struct {
			Integration struct {
				ID string `json:"id"`
			} `json:"integration"`
		}
		err := x.Client.do(ctx, h, "GET", "/v1/admin/integrations/"+url.PathEscape(name)+"/"+url.PathEscape(version), nil, &got)
		if NotFound(err) {
			err = x.Client.do(ctx, h, "GET", "/v1/admin/hub/integrations/"+url.PathEscape(name)+"/"+url.PathEscape(version), nil, &got)
		}
		if NotFound(err) {
			x.msg(fmt.Sprintf("bot %s: installation %q: integration %s@%s is not on this platform: create or publish it, then import again", e.ID, alias, name, version))
			delete(ints, alias)
			continue
		}
		if err != nil {
			return e, err
		}
		in["integrationId"], _ = json.Marshal(got.Integration.ID)
	}
	d.BotJSON["integrations"], _ = json.Marshal(ints)
	raw, err := json.Marshal(map[string]any{"bot": d.Bot, "botJson": d.BotJSON})
	if err != nil {
		return e, err
	}
	e.Data = raw
	return e, nil
}

// remap gives the entry's record a new id the first time its id is seen,
// and rewrites every string of the entry that is an id already remapped
// (ids are unique random strings, so a string equal to one is a reference
// to it). Table row ids (numbers, per table) are kept.
func (x *importer) remap(e archive.Entry) (archive.Entry, error) {
	newID := func(old, prefix string) string {
		if n, ok := x.ids[old]; ok {
			return n
		}
		// An id of this platform's shape keeps its kind's prefix; another
		// (Botpress Cloud's) takes the prefix of the entry's kind.
		if i := strings.IndexByte(old, '_'); i > 0 && platform.HasPrefix(old, old[:i+1]) {
			prefix = old[:i+1]
		}
		n := platform.NewID(prefix)
		x.ids[old] = n
		return n
	}
	if p, ok := kindPrefixes[e.Kind]; ok {
		var rec struct {
			ID  string `json:"id"`
			Bot struct {
				ID string `json:"id"`
			} `json:"bot"`
		}
		json.Unmarshal(e.Data, &rec)
		if e.Kind == "bot" {
			rec.ID = rec.Bot.ID
		}
		if rec.ID != "" {
			newID(rec.ID, p)
		}
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(e.Data))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return e, err
	}
	v = x.rewrite(v)
	raw, err := json.Marshal(v)
	if err != nil {
		return e, err
	}
	e.Data = raw
	if n, ok := x.ids[e.Bot]; ok {
		e.Bot = n
	}
	if n, ok := x.ids[e.ID]; ok {
		e.ID = n
	}
	return e, nil
}

func (x *importer) rewrite(v any) any {
	switch t := v.(type) {
	case string:
		if n, ok := x.ids[t]; ok {
			return n
		}
	case []any:
		for i := range t {
			t[i] = x.rewrite(t[i])
		}
	case map[string]any:
		for k, val := range t {
			t[k] = x.rewrite(val)
		}
	}
	return v
}

// kindPrefixes are the id prefixes this platform gives each kind.
var kindPrefixes = map[string]string{
	"bot": "bot_", "table": "table_", "knowledgeBase": "kb_", "file": "file_", "user": "user_", "conversation": "conv_",
	"message": "msg_", "event": "evt_", "task": "task_", "workflow": "wflow_",
}

// ErrIncomplete re-exports archive.ErrIncomplete.
var ErrIncomplete = archive.ErrIncomplete
