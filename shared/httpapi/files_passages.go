package httpapi

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/files"
	"github.com/botforge/platform/shared/platform"
)

// --- listFilePassages ---

const (
	defaultPassagePage = 20
	maxPassagePage     = 200
)

func (s *server) listFilePassages(c *call) (any, error) {
	q := c.query()
	limit, err := q.str("limit")
	if err != nil {
		return nil, err
	}
	if limit == "" {
		if limit, err = q.str("pageSize"); err != nil {
			return nil, err
		}
	}
	n := defaultPassagePage
	if limit != "" {
		if n, err = strconv.Atoi(limit); err != nil || n < 1 || n > maxPassagePage {
			return nil, platform.Invalid("query parameter \"limit\" must be an integer from 1 to %d", maxPassagePage)
		}
	}
	r, err := s.liveFile(c, c.PathValue("id"))
	if err != nil {
		return nil, err
	}
	list := r.ID + "|" + r.PassageSet
	tok, err := q.str("nextToken")
	if err != nil {
		return nil, err
	}
	p := dynamo.Page{Limit: int32(n)}
	if tok != "" {
		if p.Start, err = c.s.pager.decode(c.op+"|"+list, tok); err != nil {
			return nil, err
		}
	}
	out := []platform.Passage{}
	var next map[string]string
	if r.PassageSet != "" {
		if out, next, err = s.Store.ListPassages(c.ctx, r.ID, r.PassageSet, p); err != nil {
			return nil, err
		}
	}
	return map[string]any{"passages": out, "meta": c.meta(list, next)}, nil
}

// --- setFilePassages ---

// maxSetPassages bounds the passages of one setFilePassages call.
const maxSetPassages = 2000

func (s *server) setFilePassages(c *call) (any, error) {
	var in struct {
		Passages []struct {
			Content    string `json:"content"`
			Type       string `json:"type"`
			PageNumber *int   `json:"pageNumber"`
		} `json:"passages"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	if len(in.Passages) > maxSetPassages {
		return nil, platform.Invalid("invalid body: field \"passages\": at most %d passages", maxSetPassages)
	}
	r, err := s.liveFile(c, c.PathValue("id"))
	if err != nil {
		return nil, err
	}
	if !r.Status.Uploaded() {
		return nil, platform.Errorf(platform.ErrResourceLocked, "file %q has no uploaded content yet (status %s): upload it before setting its passages", c.PathValue("id"), r.Status)
	}
	set := platform.NewID("")
	passages := make([]platform.IndexedPassage, 0, len(in.Passages))
	var crumbs []string // title, then subtitles
	for i, p := range in.Passages {
		kind := p.Type
		if kind == "" {
			kind = files.KindParagraph
		}
		pos := i
		ip := platform.IndexedPassage{Passage: platform.Passage{
			ID: files.PassageID(set, pos), Content: p.Content,
			Meta: platform.PassageMeta{Type: "chunk", Subtype: kind, Position: &pos, PageNumber: p.PageNumber},
		}}
		switch kind {
		case files.KindTitle:
			crumbs = crumbs[:0]
		case files.KindSubtitle:
			if len(crumbs) > 1 {
				crumbs = crumbs[:1]
			}
		}
		ip.Breadcrumb = strings.Join(crumbs, " > ")
		if kind == files.KindTitle || kind == files.KindSubtitle {
			crumbs = append(crumbs, strings.TrimSpace(strings.TrimLeft(p.Content, "# ")))
		}
		passages = append(passages, ip)
	}
	var vectors []platform.VectorChunk
	if s.Semantic != nil {
		// Embedded first: a failing model leaves the file as it was.
		var eerr *files.EmbedError
		if vectors, err = s.Semantic.Embed(c.ctx, r.ID, set, passages); errors.As(err, &eerr) {
			s.Logger.WarnContext(c.ctx, "setFilePassages: embeddings failed", "file", r.ID, "err", err)
			return nil, platform.Errorf(platform.ErrBadGateway, "%s; the file's passages are unchanged", eerr.Error())
		} else if err != nil {
			return nil, err
		}
	}
	if err := s.Store.PutPassages(c.ctx, r, set, passages, files.Postings(passages)); err != nil {
		return nil, err
	}
	if len(vectors) > 0 {
		if err := s.Store.PutVectors(c.ctx, r, vectors); err != nil {
			_ = s.Store.DeletePassageSet(c.ctx, r.ID, set)
			return nil, err
		}
	}
	old, _, err := s.Store.UpdateFileFrom(c.ctx, &r, r.ID, func(f *platform.FileRecord) error {
		if f.Generation != r.Generation {
			return platform.Errorf(platform.ErrResourceLocked, "file %q was uploaded again meanwhile; set its passages again", c.PathValue("id"))
		}
		f.Index = true
		f.Status, f.FailedStatusReason, f.IndexingStack = platform.FileIndexingCompleted, "", files.IndexingStack
		f.PassageSet, f.PassageCount = set, len(passages)
		f.UpdatedAt = platform.Now()
		return nil
	})
	if err != nil {
		_ = s.Store.DeletePassageSet(c.ctx, r.ID, set)
		return nil, err
	}
	if old.PassageSet != "" && old.PassageSet != set {
		if err := s.Store.DeletePassageSet(c.ctx, r.ID, old.PassageSet); err != nil {
			s.Logger.WarnContext(c.ctx, "replaced passages not deleted", "file", r.ID, "err", err)
		}
	}
	return nil, nil
}

// --- searchFiles ---

const (
	defaultSearchLimit = 10
	maxSearchLimit     = 50
	maxContextDepth    = 10
	// maxSearchFiles bounds the candidate files a search checks (their
	// records are read to apply the filters).
	maxSearchFiles = 500
)

type searchFile struct {
	ID          string                     `json:"id"`
	Key         string                     `json:"key"`
	ContentType string                     `json:"contentType"`
	Metadata    map[string]json.RawMessage `json:"metadata"`
	Tags        map[string]string          `json:"tags"`
	CreatedAt   string                     `json:"createdAt"`
	UpdatedAt   string                     `json:"updatedAt"`
}

type searchContext struct {
	Text   string `json:"text"`
	Offset *int   `json:"offset,omitempty"`
	Type   string `json:"type"`
}

type searchPassage struct {
	Content string               `json:"content"`
	Score   float64              `json:"score"`
	Meta    platform.PassageMeta `json:"meta"`
	File    searchFile           `json:"file"`
	Context []searchContext      `json:"context,omitempty"`
}

func (s *server) searchFiles(c *call) (any, error) {
	q := c.query()
	query, err := q.str("query")
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(query) == "" {
		return nil, platform.Invalid("query parameter \"query\" is required")
	}
	filter, err := files.ParseTagFilter(c.URL.Query())
	if err != nil {
		return nil, err
	}
	intParam := func(name string, def, lo, hi int) (int, error) {
		v, err := q.str(name)
		if err != nil || v == "" {
			return def, err
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < lo || n > hi {
			return 0, platform.Invalid("query parameter %q must be an integer from %d to %d", name, lo, hi)
		}
		return n, nil
	}
	depth, err := intParam("contextDepth", 1, 0, maxContextDepth)
	if err != nil {
		return nil, err
	}
	limit, err := intParam("limit", defaultSearchLimit, 1, maxSearchLimit)
	if err != nil {
		return nil, err
	}
	var opts [3]bool
	for i, name := range []string{"consolidate", "includeBreadcrumb", "withContext"} {
		b, err := q.boolean(name)
		if err != nil {
			return nil, err
		}
		opts[i] = b != nil && *b
	}
	consolidate, breadcrumb, withContext := opts[0], opts[1], opts[2]
	if consolidate && withContext {
		return nil, platform.Invalid("withContext is not supported with consolidate")
	}

	out := []searchPassage{}
	terms := files.QueryTerms(query)
	if len(terms) == 0 && s.Semantic == nil {
		return map[string]any{"passages": out}, nil
	}
	// Postings of each term; a term in more files than the cap carries
	// little information and is dropped when other terms remain.
	byTerm := map[string][]platform.FilePosting{}
	for _, t := range terms {
		ps, more, err := s.Store.Postings(c.ctx, c.bot.ID, t, files.MaxPostingsPerTerm)
		if err != nil {
			return nil, err
		}
		if more && len(terms) > 1 {
			continue
		}
		byTerm[t] = ps
	}
	hits := files.Rank(byTerm)
	if s.Semantic != nil {
		// Semantic ranking: the query's similarity to the bot's passages
		// combined with BM25 (files.Combine). When the model fails the
		// search stays lexical rather than failing.
		sim, err := s.Semantic.Similarities(c.ctx, c.bot.ID, query)
		var eerr *files.EmbedError
		switch {
		case errors.As(err, &eerr):
			s.Logger.WarnContext(c.ctx, "searchFiles: query not embedded, lexical ranking only", "err", err)
		case err != nil:
			return nil, err
		default:
			hits = files.Combine(hits, sim)
		}
	}

	// Keep the hits of current, filtered-in passage sets, best first,
	// reading the candidate files' records a batch at a time.
	recs := map[string]platform.FileRecord{}
	checked := map[string]bool{}
	var kept []files.Hit
	wantFiles := map[string]bool{}
	t := now()
	for i := 0; i < len(hits) && len(checked) < maxSearchFiles; {
		var batch []string
		for j := i; j < len(hits) && len(batch) < 100; j++ {
			if id := hits[j].FileID; !checked[id] {
				checked[id] = true
				batch = append(batch, id)
			}
		}
		got, err := s.Store.GetFiles(c.ctx, batch)
		if err != nil {
			return nil, err
		}
		for id, r := range got {
			if r.BotID == c.bot.ID && r.Status == platform.FileIndexingCompleted && !files.Expired(r.ExpiresAt, t) && filter.Match(r.Tags) {
				recs[id] = r
			}
		}
		done := false
		for ; i < len(hits); i++ {
			h := hits[i]
			if !checked[h.FileID] {
				break
			}
			if r, ok := recs[h.FileID]; !ok || r.PassageSet != h.Set {
				continue
			}
			if consolidate && !wantFiles[h.FileID] && len(wantFiles) == limit {
				continue
			}
			wantFiles[h.FileID] = true
			kept = append(kept, h)
			if !consolidate && len(kept) == limit {
				done = true
				break
			}
		}
		if done {
			break
		}
	}
	if len(kept) == 0 {
		return map[string]any{"passages": out}, nil
	}

	// The passages and their neighbours.
	var refs []dynamo.PassageRef
	d := depth
	if consolidate {
		d = 0
	}
	for _, h := range kept {
		for p := h.Position - d; p <= h.Position+d; p++ {
			refs = append(refs, dynamo.PassageRef{FileID: h.FileID, Set: h.Set, Position: p})
		}
	}
	texts, err := s.Store.GetPassages(c.ctx, refs)
	if err != nil {
		return nil, err
	}
	fileOf := func(r platform.FileRecord) searchFile {
		f := fileOut(c, r)
		return searchFile{ID: f.ID, Key: f.Key, ContentType: f.ContentType, Metadata: f.Metadata, Tags: f.Tags, CreatedAt: f.CreatedAt, UpdatedAt: f.UpdatedAt}
	}
	if consolidate {
		return map[string]any{"passages": consolidated(kept, texts, recs, fileOf)}, nil
	}
	for _, h := range kept {
		ref := dynamo.PassageRef{FileID: h.FileID, Set: h.Set, Position: h.Position}
		cur, ok := texts[ref]
		if !ok {
			continue
		}
		var parts []string
		var ctxs []searchContext
		if breadcrumb && cur.Breadcrumb != "" {
			parts = append(parts, cur.Breadcrumb)
			ctxs = append(ctxs, searchContext{Text: cur.Breadcrumb, Type: "breadcrumb"})
		}
		for off := -depth; off <= depth; off++ {
			n, ok := texts[dynamo.PassageRef{FileID: h.FileID, Set: h.Set, Position: h.Position + off}]
			if !ok {
				continue
			}
			typ := "current"
			if off < 0 {
				typ = "preceding"
			} else if off > 0 {
				typ = "subsequent"
			}
			o := off
			parts = append(parts, n.Content)
			ctxs = append(ctxs, searchContext{Text: n.Content, Offset: &o, Type: typ})
		}
		sp := searchPassage{Content: strings.Join(parts, "\n\n"), Score: h.Score, Meta: cur.Meta, File: fileOf(recs[h.FileID])}
		if withContext {
			sp.Context = ctxs
		}
		out = append(out, sp)
	}
	return map[string]any{"passages": out}, nil
}

// consolidated merges the hits of each file into one passage: the matching
// passages in document order, each under its headings when they change.
func consolidated(kept []files.Hit, texts map[dynamo.PassageRef]platform.IndexedPassage, recs map[string]platform.FileRecord, fileOf func(platform.FileRecord) searchFile) []searchPassage {
	var order []string
	byFile := map[string][]files.Hit{}
	for _, h := range kept {
		if _, ok := byFile[h.FileID]; !ok {
			order = append(order, h.FileID)
		}
		byFile[h.FileID] = append(byFile[h.FileID], h)
	}
	out := []searchPassage{}
	for _, id := range order {
		hs := byFile[id]
		best := hs[0].Score
		sortHitsByPosition(hs)
		var parts []string
		crumb := ""
		for _, h := range hs {
			p, ok := texts[dynamo.PassageRef{FileID: h.FileID, Set: h.Set, Position: h.Position}]
			if !ok {
				continue
			}
			if p.Breadcrumb != "" && p.Breadcrumb != crumb {
				parts = append(parts, p.Breadcrumb)
				crumb = p.Breadcrumb
			}
			parts = append(parts, p.Content)
		}
		pos := hs[0].Position
		out = append(out, searchPassage{Content: strings.Join(parts, "\n\n"), Score: best,
			Meta: platform.PassageMeta{Type: "consolidated", Position: &pos}, File: fileOf(recs[id])})
	}
	return out
}

func sortHitsByPosition(hs []files.Hit) {
	for i := 1; i < len(hs); i++ {
		for j := i; j > 0 && hs[j].Position < hs[j-1].Position; j-- {
			hs[j], hs[j-1] = hs[j-1], hs[j]
		}
	}
}
