package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/files"
	"github.com/botforge/platform/shared/platform"
)

// --- helpers ---

var errNoStorage = platform.Errorf(platform.ErrInternal, "file storage is not configured on this server")

// origin is scheme://host through which the caller reached the API: file
// URLs (and, locally, upload URLs) are built on it.
func origin(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if p := r.Header.Get("X-Forwarded-Proto"); p == "http" || p == "https" {
		scheme = p
	}
	return scheme + "://" + r.Host
}

// fileOut is a file as answered: its url is the exact file reference of its
// current generation, served by this API (never a storage address), signed
// so that it is readable without a token for an hour or two (as Botpress
// Cloud's urls are: @botpress/cognitive reads its preferences file with a
// plain GET), or "" until the content is uploaded.
func fileOut(c *call, r platform.FileRecord) platform.File {
	f := r.File
	f.URL = ""
	if r.Checksum != "" && r.Status.Uploaded() {
		ref := files.RefOf(r)
		f.URL = origin(c.Request) + ref.Path() + "?" + ref.SignedQuery(c.s.fileURLKey(), files.SignedExpiry(now()))
	}
	if f.Tags == nil {
		f.Tags = map[string]string{}
	}
	if f.Metadata == nil {
		f.Metadata = map[string]json.RawMessage{}
	}
	if f.AccessPolicies == nil {
		f.AccessPolicies = []string{}
	}
	return f
}

func now() time.Time { return platform.Clock() }

// liveFile resolves a file of the caller's bot by id or key. An expired
// file is removed on the spot and reported missing.
func (s *server) liveFile(c *call, idOrKey string) (platform.FileRecord, error) {
	r, err := s.Store.ResolveFile(c.ctx, c.bot.ID, idOrKey)
	if err != nil {
		if platform.TypeOf(err) == platform.ErrResourceNotFound {
			return r, platform.NotFound("file", idOrKey)
		}
		return r, err
	}
	if files.Expired(r.ExpiresAt, now()) {
		s.expire(c.ctx, r)
		return r, platform.NotFound("file", idOrKey)
	}
	return r, nil
}

// expire deletes an expired file the API noticed: its items (DynamoDB's TTL
// would remove the record later, but not its object, passages or counts)
// and its object. Best effort: a failure is logged and retried next time.
func (s *server) expire(ctx context.Context, r platform.FileRecord) {
	ctx = context.WithoutCancel(ctx)
	_, err := s.Store.DeleteFileFrom(ctx, &r, r.ID, func(cur platform.FileRecord) error {
		if !files.Expired(cur.ExpiresAt, now()) {
			return errNotExpired
		}
		return nil
	})
	if err != nil && !errors.Is(err, errNotExpired) && platform.TypeOf(err) != platform.ErrResourceNotFound {
		s.Logger.WarnContext(ctx, "expired file cleanup failed", "file", r.ID, "err", err)
		return
	}
	if err == nil && s.Files != nil {
		if err := s.Files.Delete(ctx, r.ObjectKey()); err != nil {
			s.Logger.WarnContext(ctx, "expired file object cleanup failed", "file", r.ID, "err", err)
		}
	}
}

var (
	errNotExpired = errors.New("file no longer expired")
	errChanged    = errors.New("file changed meanwhile")
)

// dropGeneration removes what a replaced generation left: its object and
// its passages. Best effort: neither is reachable any more.
func (s *server) dropGeneration(ctx context.Context, old platform.FileRecord) {
	ctx = context.WithoutCancel(ctx)
	if s.Files != nil {
		if err := s.Files.Delete(ctx, old.ObjectKey()); err != nil {
			s.Logger.WarnContext(ctx, "object of a replaced file generation not deleted", "file", old.ID, "err", err)
		}
	}
	if old.PassageSet != "" {
		if err := s.Store.DeletePassageSet(ctx, old.ID, old.PassageSet); err != nil {
			s.Logger.WarnContext(ctx, "passages of a replaced file generation not deleted", "file", old.ID, "err", err)
		}
	}
}

func (s *server) completer() *files.Completer {
	return &files.Completer{Records: s.Store, Objects: s.Files, Log: s.Logger, Semantic: s.Semantic}
}

func nonNilTags(in map[string]*string) map[string]string {
	out := make(map[string]string, len(in))
	for k, v := range in {
		if v != nil {
			out[k] = *v
		}
	}
	return out
}

func dedupePolicies(in []string) []string {
	out := []string{}
	seen := map[string]bool{}
	for _, p := range in {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// --- upsertFile ---

type fileUpload struct {
	platform.File
	UploadURL string `json:"uploadUrl"`
}

func (s *server) upsertFile(c *call) (any, error) {
	var in struct {
		Key                                string             `json:"key"`
		Tags                               map[string]*string `json:"tags"`
		Size                               json.Number        `json:"size"`
		Index                              bool               `json:"index"`
		Indexing                           json.RawMessage    `json:"indexing"`
		AccessPolicies                     []string           `json:"accessPolicies"`
		ContentType                        *string            `json:"contentType"`
		ExpiresAt                          *string            `json:"expiresAt"`
		PublicContentImmediatelyAccessible bool               `json:"publicContentImmediatelyAccessible"`
		Metadata                           json.RawMessage    `json:"metadata"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	if s.Files == nil {
		return nil, errNoStorage
	}
	if err := files.CheckKey(`body: field "key"`, in.Key); err != nil {
		return nil, err
	}
	size, err := files.CheckSize(in.Size)
	if err != nil {
		return nil, err
	}
	if err := files.CheckTags("tags", in.Tags); err != nil {
		return nil, err
	}
	contentType := files.ContentTypeFor(in.Key)
	if in.ContentType != nil {
		if err := files.CheckContentType(*in.ContentType); err != nil {
			return nil, err
		}
		contentType = *in.ContentType
	}
	expiresAt := ""
	if in.ExpiresAt != nil {
		t, err := files.ParseExpiry(*in.ExpiresAt, now())
		if err != nil {
			return nil, err
		}
		expiresAt = platform.FormatTime(t)
	}
	metadata, err := files.CheckMetadata(in.Metadata)
	if err != nil {
		return nil, err
	}
	if in.PublicContentImmediatelyAccessible {
		return nil, platform.Invalid("invalid body: field \"publicContentImmediatelyAccessible\": file content is only served through the authenticated API, never publicly")
	}
	if len(in.Indexing) > 0 && string(in.Indexing) == "null" {
		in.Indexing = nil
	}
	bot := c.bot.ID
	old, rec, err := s.Store.UpsertFile(c.ctx, bot, in.Key, func(old *platform.FileRecord) (platform.FileRecord, error) {
		ts := platform.Now()
		r := platform.FileRecord{
			File: platform.File{
				ID: platform.NewID(platform.PrefixFile), BotID: bot, Key: in.Key, Size: size,
				ContentType: contentType, Tags: nonNilTags(in.Tags), Metadata: metadata,
				CreatedAt: ts, UpdatedAt: ts, AccessPolicies: dedupePolicies(in.AccessPolicies),
				Index: in.Index, Status: platform.FileUploadPending, ExpiresAt: expiresAt,
				Owner: platform.FileOwner{Type: "bot", ID: bot},
			},
			Generation: platform.NewID(""),
			Indexing:   in.Indexing,
		}
		if old != nil {
			// Same file, new generation: its content is erased.
			r.ID = old.ID
			if !files.Expired(old.ExpiresAt, now()) {
				r.CreatedAt = old.CreatedAt
			}
		}
		return r, nil
	})
	if err != nil {
		return nil, err
	}
	if old != nil {
		s.dropGeneration(c.ctx, *old)
	}
	url, err := s.Files.PresignPut(platform.WithOrigin(c.ctx, origin(c.Request)), rec.ObjectKey(), rec.ContentType, rec.Size, files.UploadURLTTL)
	if err != nil {
		return nil, err
	}
	return map[string]any{"file": fileUpload{File: fileOut(c, rec), UploadURL: url}}, nil
}

// --- getFile, deleteFile ---

func (s *server) getFile(c *call) (any, error) {
	r, err := s.liveFile(c, c.PathValue("id"))
	if err != nil {
		return nil, err
	}
	if r.Status == platform.FileUploadPending && s.CompleteOnRead && s.Files != nil {
		// Nothing else tells this process that the object arrived: look
		// (one HEAD while it has not) and complete the upload if it has.
		if err := s.completer().ObjectCreated(context.WithoutCancel(c.ctx), r.ObjectKey()); err != nil {
			s.Logger.WarnContext(c.ctx, "upload completion on read failed", "file", r.ID, "err", err)
		} else if r, err = s.liveFile(c, r.ID); err != nil {
			return nil, err
		}
	}
	return map[string]any{"file": fileOut(c, r)}, nil
}

func (s *server) deleteFile(c *call) (any, error) {
	idOrKey := c.PathValue("id")
	r, err := s.liveFile(c, idOrKey)
	if err != nil {
		return nil, err
	}
	if s.Files == nil {
		return nil, errNoStorage
	}
	bot := c.bot.ID
	r, err = s.Store.DeleteFileFrom(c.ctx, &r, r.ID, func(cur platform.FileRecord) error {
		if cur.BotID != bot {
			return platform.NotFound("file", idOrKey)
		}
		return nil
	})
	if err != nil {
		if platform.TypeOf(err) == platform.ErrResourceNotFound {
			return nil, platform.NotFound("file", idOrKey)
		}
		return nil, err
	}
	// The record is gone, so the object can no longer be served; delete it.
	if err := s.Files.Delete(context.WithoutCancel(c.ctx), r.ObjectKey()); err != nil {
		s.Logger.WarnContext(c.ctx, "object of a deleted file not deleted", "file", r.ID, "err", err)
	}
	return nil, nil
}

// --- updateFileMetadata ---

func (s *server) updateFileMetadata(c *call) (any, error) {
	var in struct {
		Metadata       json.RawMessage    `json:"metadata"`
		Tags           map[string]*string `json:"tags"`
		AccessPolicies []string           `json:"accessPolicies"`
		ExpiresAt      json.RawMessage    `json:"expiresAt"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	if err := files.CheckTags("tags", in.Tags); err != nil {
		return nil, err
	}
	var patch map[string]json.RawMessage
	if len(in.Metadata) > 0 && string(in.Metadata) != "null" {
		var err error
		if patch, err = files.CheckMetadata(in.Metadata); err != nil {
			return nil, err
		}
	}
	var expiry *string // nil: keep; "": remove
	if len(in.ExpiresAt) > 0 {
		e := ""
		if string(in.ExpiresAt) != "null" {
			var s string
			if err := json.Unmarshal(in.ExpiresAt, &s); err != nil {
				return nil, platform.Invalid("invalid body: field \"expiresAt\": must be a timestamp or null")
			}
			t, err := files.ParseExpiry(s, now())
			if err != nil {
				return nil, err
			}
			e = platform.FormatTime(t)
		}
		expiry = &e
	}
	r, err := s.liveFile(c, c.PathValue("id"))
	if err != nil {
		return nil, err
	}
	_, updated, err := s.Store.UpdateFileFrom(c.ctx, &r, r.ID, func(f *platform.FileRecord) error {
		for k, v := range patch {
			if string(v) == "null" {
				delete(f.Metadata, k)
			} else {
				f.Metadata[k] = v
			}
		}
		if b, _ := json.Marshal(f.Metadata); len(b) > files.MaxMetadataBytes {
			return platform.Errorf(platform.ErrPayloadTooLarge, "field \"metadata\": the file's metadata would exceed %d bytes of JSON", files.MaxMetadataBytes)
		}
		for k, v := range in.Tags {
			if v == nil {
				delete(f.Tags, k)
			} else {
				f.Tags[k] = *v
			}
		}
		if len(f.Tags) > files.MaxTags {
			return platform.Invalid("invalid body: field \"tags\": a file has at most %d tags", files.MaxTags)
		}
		if in.AccessPolicies != nil {
			f.AccessPolicies = dedupePolicies(in.AccessPolicies)
		}
		if expiry != nil {
			f.ExpiresAt = *expiry
		}
		f.UpdatedAt = platform.Now()
		return nil
	})
	if err != nil {
		if platform.TypeOf(err) == platform.ErrResourceNotFound {
			return nil, platform.NotFound("file", c.PathValue("id"))
		}
		return nil, err
	}
	return map[string]any{"file": fileOut(c, updated)}, nil
}

// --- listFiles ---

// maxFileIDs is the most ids listFiles takes.
const maxFileIDs = 50

func (s *server) listFiles(c *call) (any, error) {
	q := c.query()
	order, err := q.oneOf("sortField", dynamo.FileOrderCreatedAt, dynamo.FileOrderKey, dynamo.FileOrderSize, dynamo.FileOrderCreatedAt, dynamo.FileOrderUpdatedAt, dynamo.FileOrderStatus)
	if err != nil {
		return nil, err
	}
	// Timestamps default to most recent first; key, size and status to ascending.
	def := "asc"
	if order == dynamo.FileOrderCreatedAt || order == dynamo.FileOrderUpdatedAt {
		def = "desc"
	}
	dir, err := q.oneOf("sortDirection", def, "asc", "desc")
	if err != nil {
		return nil, err
	}
	filter, err := files.ParseTagFilter(c.URL.Query())
	if err != nil {
		return nil, err
	}
	indexed, err := q.boolean("indexed")
	if err != nil {
		return nil, err
	}
	ids := append(append([]string{}, q.v["ids"]...), q.v["ids[]"]...)
	if len(ids) > maxFileIDs {
		return nil, platform.Invalid("query parameter \"ids\": at most %d ids", maxFileIDs)
	}
	for _, id := range ids {
		if id == "" {
			return nil, platform.Invalid("query parameter \"ids\": ids must not be empty")
		}
	}
	idx := "-"
	if indexed != nil {
		idx = strconv.FormatBool(*indexed)
	}
	list := strings.Join([]string{c.bot.ID, order, dir, filter.String(), idx, strings.Join(ids, ",")}, "|")
	p, err := c.page(list)
	if err != nil {
		return nil, err
	}

	var expired []platform.FileRecord
	t := now()
	accept := func(r platform.FileRecord) bool {
		if files.Expired(r.ExpiresAt, t) {
			expired = append(expired, r)
			return false
		}
		return r.BotID == c.bot.ID && filter.Match(r.Tags) && (indexed == nil || r.Index == *indexed)
	}
	var recs []platform.FileRecord
	var next map[string]string
	if len(ids) > 0 {
		recs, next, err = s.listFilesByID(c, ids, order, dir == "desc", accept, p)
	} else {
		scan := dynamo.FileScan{BotID: c.bot.ID, Order: order, Desc: dir == "desc", Accept: accept}
		if order == dynamo.FileOrderCreatedAt {
			if scan.Tag, err = s.tagDriver(c, filter, p); err != nil {
				return nil, err
			}
		}
		if scan.Tag != nil && scan.Tag[0] == "" {
			recs = nil // a required tag value no file has
		} else {
			recs, next, err = s.Store.ListFiles(c.ctx, scan, p)
		}
	}
	if err != nil {
		return nil, err
	}
	s.expireSome(c.ctx, expired)
	out := make([]platform.File, 0, len(recs))
	for _, r := range recs {
		out = append(out, fileOut(c, r))
	}
	return map[string]any{"files": out, "meta": c.meta(list, next)}, nil
}

// expireSome cleans up a few of the expired files a list skipped; the rest
// are cleaned up by later lists.
func (s *server) expireSome(ctx context.Context, rs []platform.FileRecord) {
	for i, r := range rs {
		if i == 10 {
			return
		}
		s.expire(ctx, r)
	}
}

// tagDriver picks the tag (name, value) a filtered listing reads through
// the tag index: the equality condition that the fewest files satisfy
// (one BatchGetItem of their counts). A continued listing keeps the tag of
// its first page, which its nextToken names. [2]string{"", ""} means a
// required value no file has.
func (s *server) tagDriver(c *call, f files.TagFilter, p dynamo.Page) (*[2]string, error) {
	eq := f.Equalities()
	if len(eq) == 0 {
		return nil, nil
	}
	if p.Start != nil {
		for _, pair := range eq {
			if dynamo.FileTagPartition(c.bot.ID, pair[0], pair[1]) == p.Start["gsi1pk"] {
				return &pair, nil
			}
		}
		return nil, nil
	}
	counts, err := s.Store.FileTagCounts(c.ctx, c.bot.ID, eq)
	if err != nil {
		return nil, err
	}
	best := -1
	for i, n := range counts {
		if n <= 0 {
			return &[2]string{"", ""}, nil
		}
		if best < 0 || n < counts[best] {
			best = i
		}
	}
	return &eq[best], nil
}

// listFilesByID lists the files named by ids (at most 50, one
// BatchGetItem): the only list sorted in memory, bounded by that limit.
func (s *server) listFilesByID(c *call, ids []string, order string, desc bool, accept func(platform.FileRecord) bool, p dynamo.Page) ([]platform.FileRecord, map[string]string, error) {
	byID, err := s.Store.GetFiles(c.ctx, ids)
	if err != nil {
		return nil, nil, err
	}
	var all []platform.FileRecord
	for _, r := range byID {
		if accept(r) {
			all = append(all, r)
		}
	}
	sortKey := func(r platform.FileRecord) string {
		switch order {
		case dynamo.FileOrderKey:
			return r.Key
		case dynamo.FileOrderSize:
			return strconv.FormatInt(r.Size+1e15, 10)[1:]
		case dynamo.FileOrderUpdatedAt:
			return r.UpdatedAt
		case dynamo.FileOrderStatus:
			return string(r.Status) + "#" + r.CreatedAt
		}
		return r.CreatedAt
	}
	sort.Slice(all, func(i, j int) bool {
		a, b := sortKey(all[i])+"\x00"+all[i].ID, sortKey(all[j])+"\x00"+all[j].ID
		if desc {
			return a > b
		}
		return a < b
	})
	offset := 0
	if p.Start != nil {
		if offset, err = strconv.Atoi(p.Start["offset"]); err != nil || offset < 0 {
			return nil, nil, platform.Invalid("invalid nextToken")
		}
	}
	if offset > len(all) {
		offset = len(all)
	}
	end := min(offset+int(p.Limit), len(all))
	var next map[string]string
	if end < len(all) {
		next = map[string]string{"offset": strconv.Itoa(end)}
	}
	return all[offset:end], next, nil
}

// --- copyFile ---

func (s *server) copyFile(c *call) (any, error) {
	var in struct {
		Overwrite bool `json:"overwrite"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	if s.Files == nil {
		return nil, errNoStorage
	}
	destKey := c.PathValue("destinationKey")
	if err := files.CheckKey(`path parameter "destinationKey"`, destKey); err != nil {
		return nil, err
	}
	destBot, err := s.copyDestination(c)
	if err != nil {
		return nil, err
	}
	src, err := s.liveFile(c, c.PathValue("idOrKey"))
	if err != nil {
		return nil, err
	}
	if src.Checksum == "" || !src.Status.Uploaded() {
		return nil, platform.Errorf(platform.ErrResourceLocked, "file %q has no uploaded content to copy yet (status %s)", c.PathValue("idOrKey"), src.Status)
	}
	if destBot == src.BotID && destKey == src.Key {
		return nil, platform.Invalid("a file cannot be copied onto itself")
	}
	old, rec, err := s.Store.UpsertFile(c.ctx, destBot, destKey, func(old *platform.FileRecord) (platform.FileRecord, error) {
		if old != nil && !in.Overwrite && !files.Expired(old.ExpiresAt, now()) {
			return platform.FileRecord{}, platform.Errorf(platform.ErrAlreadyExists, "a file with key %q already exists: pass overwrite: true to replace it", destKey)
		}
		ts := platform.Now()
		r := copyFileRecord(src)
		r.ID, r.BotID, r.Key = platform.NewID(platform.PrefixFile), destBot, destKey
		r.CreatedAt, r.UpdatedAt = ts, ts
		r.Status, r.FailedStatusReason, r.IndexingStack = platform.FileUploadPending, "", ""
		r.Owner = platform.FileOwner{Type: "bot", ID: destBot}
		r.Generation, r.Checksum, r.ETag, r.PassageSet, r.PassageCount = platform.NewID(""), "", "", "", 0
		if old != nil {
			r.ID = old.ID
			if !files.Expired(old.ExpiresAt, now()) {
				r.CreatedAt = old.CreatedAt
			}
		}
		return r, nil
	})
	if err != nil {
		return nil, err
	}
	if old != nil {
		s.dropGeneration(c.ctx, *old)
	}
	ctx := context.WithoutCancel(c.ctx)
	if err := s.Files.Copy(ctx, src.ObjectKey(), src.ETag, rec.ObjectKey()); err != nil {
		if errors.Is(err, platform.ErrObjectChanged) || errors.Is(err, platform.ErrNoObject) {
			err = platform.Errorf(platform.ErrResourceLocked, "file %q changed while being copied; try again", c.PathValue("idOrKey"))
		}
		if old == nil {
			// Nothing was replaced: leave no empty copy behind.
			_, _ = s.Store.DeleteFile(ctx, rec.ID, func(cur platform.FileRecord) error {
				if cur.Generation != rec.Generation {
					return errChanged
				}
				return nil
			})
		}
		return nil, err
	}
	// The copy is verified and indexed like an upload (in AWS its
	// ObjectCreated event does the same again, finding nothing to do).
	if err := s.completer().ObjectCreated(ctx, rec.ObjectKey()); err != nil {
		return nil, err
	}
	done, err := s.Store.GetFile(c.ctx, rec.ID)
	if err != nil {
		return nil, err
	}
	return map[string]any{"file": fileOut(c, done)}, nil
}

func copyFileRecord(r platform.FileRecord) platform.FileRecord {
	c := r
	c.Tags = make(map[string]string, len(r.Tags))
	for k, v := range r.Tags {
		c.Tags[k] = v
	}
	c.Metadata = make(map[string]json.RawMessage, len(r.Metadata))
	for k, v := range r.Metadata {
		c.Metadata[k] = v
	}
	c.AccessPolicies = append([]string{}, r.AccessPolicies...)
	return c
}

// copyDestination is the bot a copy goes to: x-destination-bot-id, which
// the caller must be allowed to write (developer), or the caller's bot.
func (s *server) copyDestination(c *call) (string, error) {
	dest := c.Header.Get("x-destination-bot-id")
	if dest == "" || dest == c.bot.ID {
		return c.bot.ID, nil
	}
	notFound := func() error { return platform.NotFound("bot", dest) }
	if c.principal.Kind != platform.PrincipalAccount {
		return "", notFound() // a bot's key acts on its own bot only
	}
	bot, err := s.Store.GetBot(c.ctx, dest)
	if err != nil {
		return "", err
	}
	probe := *c
	if err := s.authorizeMember(&probe, bot.WorkspaceID, platform.RoleDeveloper, notFound); err != nil {
		return "", err
	}
	return bot.ID, nil
}

// --- tags ---

func (s *server) listFileTags(c *call) (any, error) {
	p, err := c.page(c.bot.ID)
	if err != nil {
		return nil, err
	}
	tags, next, err := s.Store.ListFileTags(c.ctx, c.bot.ID, p)
	if err != nil {
		return nil, err
	}
	return map[string]any{"tags": tags, "meta": c.meta(c.bot.ID, next)}, nil
}

func (s *server) listFileTagValues(c *call) (any, error) {
	tag := c.PathValue("tag")
	list := c.bot.ID + "|" + tag
	p, err := c.page(list)
	if err != nil {
		return nil, err
	}
	values, next, err := s.Store.ListFileTagValues(c.ctx, c.bot.ID, tag, p)
	if err != nil {
		return nil, err
	}
	return map[string]any{"values": values, "meta": c.meta(list, next)}, nil
}
