package dynamo

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/platform"
)

// Files (docs/files.md). A file has two items carrying the same doc and
// version, always written together in one transaction:
//
//   - the record, FILE#<id> / FILE: read by id; gsi1 lists a bot's files by
//     size, gsi2 by status;
//   - the key entry, BOT#<bot>#FILEKEYS / <key>: makes the key unique in the
//     bot, reads by key, lists by key (the table's own order); gsi1 lists
//     by creation time, gsi2 by update time.
//
// Each (tag, value) of a file has a tag-index item under the record's
// partition (FILE#<id> / TAG#<hash>) whose gsi1 partition lists the files
// with that tag value by creation time. Tag names and values in use are
// counted (atomic ADD in the file's transaction) for listFileTags and
// listFileTagValues. Passages and search postings also live under
// FILE#<id>, so deleting a file's children is one Query.

const (
	skFile        = "FILE"
	attrFFileID   = "fileId"
	attrFBotID    = "botId"
	attrFCount    = "n"
	attrFName     = "name"
	attrFHits     = "hits"
	attrFPassages = "passages"
	attrFCrumb    = "crumb"

	// Orders of a bot's files, in the partitions of gsi1/gsi2.
	orderCreated = "C"
	orderUpdated = "U"
	orderSize    = "S"
	orderStatus  = "T"
)

func filePK(id string) string              { return "FILE#" + id }
func fileKeysPK(bot string) string         { return "BOT#" + bot + "#FILEKEYS" }
func filesGSI(bot, order string) string    { return "BOT#" + bot + "#FILES#" + order }
func fileTagGSI(bot, k, v string) string   { return "BOT#" + bot + "#FTAG#" + fileDigest(k, v) }
func fileTagNamesPK(bot string) string     { return "BOT#" + bot + "#FTAGS" }
func fileTagValuesPK(bot, k string) string { return "BOT#" + bot + "#FTAGV#" + fileDigest(k) }
func fileTermGSI(bot, term string) string  { return "BOT#" + bot + "#FTERM#" + term }
func skFileTag(k, v string) string         { return "TAG#" + fileDigest(k, v) }
func skPassage(set string, pos int) string { return fmt.Sprintf("PSG#%s#%06d", set, pos) }
func skTerm(set, term string) string       { return "TERM#" + set + "#" + term }

// digest is a fixed-size name for arbitrary strings (tag names and values
// can be long; key attributes cannot).
func fileDigest(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// sortable is s as a sort key: itself when short enough, else a prefix and
// a digest (unique, and still sorted by the prefix).
func fileSortKey(s string) string {
	if len(s) <= 1000 {
		return s
	}
	cut := 900
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "#" + fileDigest(s)
}

// fileDoc is how a file is stored: its wire shape plus the private state.
type fileDoc struct {
	platform.File
	Generation   string          `json:"_gen"`
	Checksum     string          `json:"_sha256,omitempty"`
	ETag         string          `json:"_etag,omitempty"`
	PassageSet   string          `json:"_pset,omitempty"`
	PassageCount int             `json:"_pcount,omitempty"`
	Indexing     json.RawMessage `json:"_indexing,omitempty"`
}

func fileTTL(r platform.FileRecord) (types.AttributeValue, bool) {
	if r.ExpiresAt == "" {
		return nil, false
	}
	t, err := time.Parse(time.RFC3339Nano, r.ExpiresAt)
	if err != nil {
		return nil, false
	}
	return num(t.Unix()), true
}

// fileItems returns the record and key-entry items of r at version ver.
func fileItems(r platform.FileRecord, ver int64) (rec, keyEntry item, err error) {
	d := fileDoc{File: r.File, Generation: r.Generation, Checksum: r.Checksum, ETag: r.ETag,
		PassageSet: r.PassageSet, PassageCount: r.PassageCount, Indexing: r.Indexing}
	d.URL = ""
	b, err := json.Marshal(d)
	if err != nil {
		return nil, nil, err
	}
	common := func(it item) item {
		it[attrDoc] = str(string(b))
		it[attrVer] = num(ver)
		it[attrFBotID] = str(r.BotID)
		it[attrFFileID] = str(r.ID)
		if ttl, ok := fileTTL(r); ok {
			it[attrTTL] = ttl
		}
		return it
	}
	rec = common(key(filePK(r.ID), skFile))
	rec[attrGSI1PK] = str(filesGSI(r.BotID, orderSize))
	rec[attrGSI1SK] = str(fmt.Sprintf("%016d#%s", r.Size, r.ID))
	rec[attrGSI2PK] = str(filesGSI(r.BotID, orderStatus))
	rec[attrGSI2SK] = str(string(r.Status) + "#" + r.CreatedAt + "#" + r.ID)
	keyEntry = common(key(fileKeysPK(r.BotID), r.Key))
	keyEntry[attrGSI1PK] = str(filesGSI(r.BotID, orderCreated))
	keyEntry[attrGSI1SK] = str(r.CreatedAt + "#" + r.ID)
	keyEntry[attrGSI2PK] = str(filesGSI(r.BotID, orderUpdated))
	keyEntry[attrGSI2SK] = str(r.UpdatedAt + "#" + r.ID)
	return rec, keyEntry, nil
}

func fileFrom(it item) (platform.FileRecord, error) {
	var d fileDoc
	if err := decodeDoc(it, &d); err != nil {
		return platform.FileRecord{}, err
	}
	if d.Tags == nil {
		d.Tags = map[string]string{}
	}
	if d.Metadata == nil {
		d.Metadata = map[string]json.RawMessage{}
	}
	if d.AccessPolicies == nil {
		d.AccessPolicies = []string{}
	}
	return platform.FileRecord{File: d.File, Generation: d.Generation, Checksum: d.Checksum, ETag: d.ETag,
		PassageSet: d.PassageSet, PassageCount: d.PassageCount, Indexing: d.Indexing, Version: getN(it, attrVer)}, nil
}

func fileNotFound(id string) error { return platform.NotFound("file", id) }

// GetFile reads a file by id, in any bot (one GetItem).
func (s *Store) GetFile(ctx context.Context, id string) (platform.FileRecord, error) {
	if !platform.HasPrefix(id, platform.PrefixFile) {
		return platform.FileRecord{}, fileNotFound(id)
	}
	it, err := s.get(ctx, filePK(id), skFile)
	if err != nil {
		return platform.FileRecord{}, err
	}
	if it == nil {
		return platform.FileRecord{}, fileNotFound(id)
	}
	return fileFrom(it)
}

// GetFileByKey reads a bot's file by key (one GetItem).
func (s *Store) GetFileByKey(ctx context.Context, botID, key string) (platform.FileRecord, error) {
	if key == "" || len(key) > 1024 {
		return platform.FileRecord{}, fileNotFound(key)
	}
	it, err := s.get(ctx, fileKeysPK(botID), key)
	if err != nil {
		return platform.FileRecord{}, err
	}
	if it == nil {
		return platform.FileRecord{}, fileNotFound(key)
	}
	return fileFrom(it)
}

// ResolveFile reads a bot's file by id or, failing that, by key: one
// GetItem, two when an id-shaped value is not a file id of the bot.
func (s *Store) ResolveFile(ctx context.Context, botID, idOrKey string) (platform.FileRecord, error) {
	if platform.HasPrefix(idOrKey, platform.PrefixFile) {
		r, err := s.GetFile(ctx, idOrKey)
		if err == nil && r.BotID == botID {
			return r, nil
		}
		if err != nil && platform.TypeOf(err) != platform.ErrResourceNotFound {
			return r, err
		}
	}
	return s.GetFileByKey(ctx, botID, idOrKey)
}

// tagCounters returns the counter updates that move a bot's tag name and
// value counts from the tags old to the tags new.
func tagCounters(bot string, old, new map[string]string) []types.TransactWriteItem {
	var out []types.TransactWriteItem
	add := func(pk, sk, name string, d int64) {
		out = append(out, types.TransactWriteItem{Update: &types.Update{
			Key:                       key(pk, sk),
			UpdateExpression:          aws.String("ADD #n :d SET #name = :name"),
			ExpressionAttributeNames:  map[string]string{"#n": attrFCount, "#name": attrFName},
			ExpressionAttributeValues: item{":d": num(d), ":name": str(name)},
		}})
	}
	for k, v := range new {
		ov, had := old[k]
		if !had {
			add(fileTagNamesPK(bot), fileSortKey(k), k, 1)
		}
		if !had || ov != v {
			add(fileTagValuesPK(bot, k), fileSortKey(v), v, 1)
		}
	}
	for k, v := range old {
		nv, has := new[k]
		if !has {
			add(fileTagNamesPK(bot), fileSortKey(k), k, -1)
		}
		if !has || nv != v {
			add(fileTagValuesPK(bot, k), fileSortKey(v), v, -1)
		}
	}
	return out
}

// tagIndexItems are the tag-index items of a file.
func tagIndexItems(r platform.FileRecord) []item {
	out := make([]item, 0, len(r.Tags))
	for k, v := range r.Tags {
		it := key(filePK(r.ID), skFileTag(k, v))
		it[attrFBotID] = str(r.BotID)
		it[attrFFileID] = str(r.ID)
		it[attrGSI1PK] = str(fileTagGSI(r.BotID, k, v))
		it[attrGSI1SK] = str(r.CreatedAt + "#" + r.ID)
		if ttl, ok := fileTTL(r); ok {
			it[attrTTL] = ttl
		}
		out = append(out, it)
	}
	return out
}

// staleTagKeys are the keys of old's tag-index items that new no longer has.
func staleTagKeys(old, new platform.FileRecord) []item {
	var out []item
	for k, v := range old.Tags {
		if nv, ok := new.Tags[k]; !ok || nv != v || old.ID != new.ID {
			out = append(out, key(filePK(old.ID), skFileTag(k, v)))
		}
	}
	return out
}

// errFileRace marks a transaction that lost a race and is worth retrying.
var errFileRace = errors.New("retry")

// fileMaxAttempts bounds the retries of a file write that keeps losing races.
const fileMaxAttempts = 8

func fileBackoff(attempt int) {
	if attempt > 0 {
		time.Sleep(time.Duration(attempt*attempt)*5*time.Millisecond + time.Duration(rand.IntN(10))*time.Millisecond)
	}
}

// writeFile commits the change of a file from old (nil: none) to new: both
// items conditional on old's version (or absence) and the tag counters, in
// one transaction. The tag-index items of new are written before (harmless
// if the transaction then fails: every read through the tag index checks
// the record), those only old had are removed after.
func (s *Store) writeFile(ctx context.Context, old *platform.FileRecord, new platform.FileRecord) (platform.FileRecord, error) {
	if old != nil && old.CreatedAt != new.CreatedAt {
		// The index sort keys change: remove the old items first (see
		// replaceFileItem on minidyn).
		if err := s.batchDelete(ctx, staleTagKeys(*old, platform.FileRecord{})); err != nil {
			return new, err
		}
	}
	if err := s.batchPut(ctx, tagIndexItems(new)); err != nil {
		return new, err
	}
	ver := int64(1)
	oldTags := map[string]string{}
	if old != nil {
		ver = old.Version + 1
		oldTags = old.Tags
	}
	rec, keyEntry, err := fileItems(new, ver)
	if err != nil {
		return new, err
	}
	tx := make([]types.TransactWriteItem, 0, 2+2*len(new.Tags))
	if old == nil {
		tx = append(tx, putNew(rec), putNew(keyEntry))
	} else {
		tx = append(tx, replaceFileItem(rec, *old), replaceFileItem(keyEntry, *old))
	}
	tx = append(tx, tagCounters(new.BotID, oldTags, new.Tags)...)
	// The bot's file storage moves by the change of size, within its quota
	// (usage_limits.go).
	var oldSize int64
	if old != nil {
		oldSize = old.Size
	}
	quotaAt := -1
	if delta := new.Size - oldSize; delta != 0 {
		count, err := s.countUsage(ctx, new.BotID, UsageStorage, delta, true)
		if err != nil {
			return new, err
		}
		quotaAt = len(tx)
		tx = append(tx, count)
	}
	if len(tx) > 100 {
		return new, platform.Invalid("too many tag changes in one write (%d tag counters to update, at most 97)", len(tx)-3)
	}
	err = s.transact(ctx, tx, func(i int) error {
		if i == quotaAt {
			return s.quotaError(UsageStorage)
		}
		return errFileRace
	})
	if fileTxConflict(err) {
		err = errFileRace
	}
	if err != nil {
		if old == nil {
			// The new id's tag-index items point at nothing: drop them.
			_ = s.batchDelete(ctx, staleTagKeys(new, platform.FileRecord{}))
		}
		return new, err
	}
	new.Version = ver
	if old != nil {
		if err := s.batchDelete(ctx, staleTagKeys(*old, new)); err != nil {
			return new, fmt.Errorf("remove stale tag-index items of %s: %w", new.ID, err)
		}
	}
	return new, nil
}

// replaceFileItem rewrites every attribute of an existing item of file old,
// if it is still at old's version. An update rather than a Put: the
// embedded DynamoDB (minidyn) corrupts a secondary index when a Put
// replaces an item with a different index sort key, while an update
// re-indexes it correctly (DynamoDB does both right).
func replaceFileItem(it item, old platform.FileRecord) types.TransactWriteItem {
	names := map[string]string{"#ver": attrVer, "#fid": attrFFileID}
	vals := item{":ver": num(old.Version), ":fid": str(old.ID)}
	var sets []string
	i := 0
	for name, v := range it {
		if name == attrPK || name == attrSK {
			continue
		}
		n, p := fmt.Sprintf("#a%d", i), fmt.Sprintf(":a%d", i)
		names[n], vals[p] = name, v
		sets = append(sets, n+" = "+p)
		i++
	}
	expr := "SET " + strings.Join(sets, ", ")
	if _, ok := it[attrTTL]; !ok {
		names["#ttl"] = attrTTL
		expr += " REMOVE #ttl"
	}
	// #ver is set to the new version through the loop above; the condition
	// reads the old one.
	return types.TransactWriteItem{Update: &types.Update{
		Key:                       key(getS(it, attrPK), getS(it, attrSK)),
		UpdateExpression:          aws.String(expr),
		ConditionExpression:       aws.String("#ver = :ver AND #fid = :fid"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: vals,
	}}
}

// fileTxConflict reports a transaction cancelled by a concurrent transaction
// on one of its items (a hot tag counter): worth retrying.
func fileTxConflict(err error) bool {
	var tc *types.TransactionCanceledException
	if errors.As(err, &tc) {
		for _, r := range tc.CancellationReasons {
			if aws.ToString(r.Code) == "TransactionConflict" {
				return true
			}
		}
	}
	var conflict *types.TransactionConflictException
	return errors.As(err, &conflict)
}

// UpsertFile creates the bot's file named key or replaces it: build gets the
// current file (nil when there is none) and returns the new one. It is
// called again if a concurrent write of the same key wins the race, so the
// end state is always one build's result, whole. Returns the replaced file,
// if any.
func (s *Store) UpsertFile(ctx context.Context, botID, key string, build func(old *platform.FileRecord) (platform.FileRecord, error)) (old *platform.FileRecord, new platform.FileRecord, err error) {
	for attempt := 0; attempt < fileMaxAttempts; attempt++ {
		fileBackoff(attempt)
		old = nil
		cur, err := s.GetFileByKey(ctx, botID, key)
		switch {
		case err == nil:
			old = &cur
		case platform.TypeOf(err) != platform.ErrResourceNotFound:
			return nil, new, err
		}
		new, err = build(old)
		if err != nil {
			return nil, new, err
		}
		new, err = s.writeFile(ctx, old, new)
		if errors.Is(err, errFileRace) {
			continue
		}
		return old, new, err
	}
	return nil, new, platform.Errorf(platform.ErrResourceLocked, "file %q is being changed concurrently; try again", key)
}

// UpdateFile changes a file by id: mutate gets a copy of the current record
// and the result is written only if the record did not change meanwhile;
// otherwise it is read again and mutate runs again. An error of mutate
// aborts. Returns the file before and after.
func (s *Store) UpdateFile(ctx context.Context, id string, mutate func(*platform.FileRecord) error) (old, updated platform.FileRecord, err error) {
	return s.UpdateFileFrom(ctx, nil, id, mutate)
}

// UpdateFileFrom is UpdateFile starting from a record already read (saving
// a read when nothing changed since).
func (s *Store) UpdateFileFrom(ctx context.Context, first *platform.FileRecord, id string, mutate func(*platform.FileRecord) error) (old, updated platform.FileRecord, err error) {
	for attempt := 0; attempt < fileMaxAttempts; attempt++ {
		fileBackoff(attempt)
		if first != nil && attempt == 0 {
			old = *first
		} else if old, err = s.GetFile(ctx, id); err != nil {
			return old, old, err
		}
		updated = copyFileRecord(old)
		if err := mutate(&updated); err != nil {
			return old, old, err
		}
		updated.ID, updated.BotID, updated.Key = old.ID, old.BotID, old.Key
		updated, err = s.writeFile(ctx, &old, updated)
		if errors.Is(err, errFileRace) {
			continue
		}
		return old, updated, err
	}
	return old, old, platform.Errorf(platform.ErrResourceLocked, "file %q is being changed concurrently; try again", id)
}

// copyFile copies a record deeply enough that mutating the copy's maps
// and slices leaves the original alone.
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

// DeleteFile deletes a file by id once check accepts it (e.g. it is of the
// caller's bot): record, key entry and tag counts in one transaction
// conditional on the version read, then its tag-index items, passages and
// postings. Returns the deleted file (its object is the caller's to delete).
func (s *Store) DeleteFile(ctx context.Context, id string, check func(platform.FileRecord) error) (platform.FileRecord, error) {
	return s.DeleteFileFrom(ctx, nil, id, check)
}

// DeleteFileFrom is DeleteFile starting from a record already read.
func (s *Store) DeleteFileFrom(ctx context.Context, first *platform.FileRecord, id string, check func(platform.FileRecord) error) (platform.FileRecord, error) {
	for attempt := 0; attempt < fileMaxAttempts; attempt++ {
		fileBackoff(attempt)
		var r platform.FileRecord
		var err error
		if first != nil && attempt == 0 {
			r = *first
		} else if r, err = s.GetFile(ctx, id); err != nil {
			return r, err
		}
		if err := check(r); err != nil {
			return r, err
		}
		cond := func(k item) types.TransactWriteItem {
			return types.TransactWriteItem{Delete: &types.Delete{
				Key:                       k,
				ConditionExpression:       aws.String("#ver = :ver AND #fid = :fid"),
				ExpressionAttributeNames:  map[string]string{"#ver": attrVer, "#fid": attrFFileID},
				ExpressionAttributeValues: item{":ver": num(r.Version), ":fid": str(r.ID)},
			}}
		}
		tx := append([]types.TransactWriteItem{cond(key(filePK(r.ID), skFile)), cond(key(fileKeysPK(r.BotID), r.Key))},
			tagCounters(r.BotID, r.Tags, nil)...)
		if r.Size != 0 {
			tx = append(tx, usageAdd(r.BotID, UsageStorage, -r.Size))
		}
		err = s.transact(ctx, tx, func(int) error { return errFileRace })
		if errors.Is(err, errFileRace) || fileTxConflict(err) {
			continue
		}
		if err != nil {
			return r, err
		}
		// What is left under the record's partition: tag-index items,
		// passages and postings.
		keys, err := s.fileChildren(ctx, r.ID)
		if err == nil {
			err = s.batchDelete(ctx, keys)
		}
		if err != nil {
			return r, fmt.Errorf("delete children of file %s: %w", r.ID, err)
		}
		return r, nil
	}
	return platform.FileRecord{}, platform.Errorf(platform.ErrResourceLocked, "file %q is being changed concurrently; try again", id)
}

// GetFiles reads files by id (BatchGetItem); missing ones are left out.
func (s *Store) GetFiles(ctx context.Context, ids []string) (map[string]platform.FileRecord, error) {
	keys := make([]item, 0, len(ids))
	seen := map[string]bool{}
	for _, id := range ids {
		if platform.HasPrefix(id, platform.PrefixFile) && !seen[id] {
			seen[id] = true
			keys = append(keys, key(filePK(id), skFile))
		}
	}
	items, err := s.batchGet(ctx, keys)
	if err != nil {
		return nil, err
	}
	out := make(map[string]platform.FileRecord, len(items))
	for _, it := range items {
		r, err := fileFrom(it)
		if err != nil {
			return nil, err
		}
		out[r.ID] = r
	}
	return out, nil
}

// File orders of ListFiles.
const (
	FileOrderKey       = "key"
	FileOrderSize      = "size"
	FileOrderCreatedAt = "createdAt"
	FileOrderUpdatedAt = "updatedAt"
	FileOrderStatus    = "status"
)

// FileScan selects a page of a bot's files.
type FileScan struct {
	BotID string
	Order string // a FileOrder*
	Desc  bool
	// Tag, when set, reads the files having this (name, value) through the
	// tag index, by creation time (Order must be createdAt).
	Tag *[2]string
	// Accept decides which files are listed (filters the index cannot).
	Accept func(platform.FileRecord) bool
}

// fileScanBudget bounds the items one page may read when Accept skips files:
// past it, the page ends short, with a nextToken.
func fileScanBudget(limit int32) int { return max(10*int(limit), 200) }

// ListFiles returns a page of a bot's files in the order asked. Each order
// is one index (docs/files.md): the key entries' partition (key), gsi1 and
// gsi2 of the key entries (createdAt, updatedAt) or of the records (size,
// status), or a tag's gsi1 partition. Reads grow with the page size and
// with the files Accept skips, never with the bot's file count.
func (s *Store) ListFiles(ctx context.Context, q FileScan, p Page) ([]platform.FileRecord, map[string]string, error) {
	in := &dynamodb.QueryInput{
		TableName:                 &s.table,
		ScanIndexForward:          aws.Bool(!q.Desc),
		ExpressionAttributeNames:  map[string]string{"#pk": attrPK},
		ExpressionAttributeValues: item{},
		KeyConditionExpression:    aws.String("#pk = :pk"),
		ExclusiveStartKey:         startKey(p.Start),
	}
	index := func(name, pkAttr, pk string) {
		in.IndexName = aws.String(name)
		in.ExpressionAttributeNames["#pk"] = pkAttr
		in.ExpressionAttributeValues[":pk"] = str(pk)
	}
	switch {
	case q.Tag != nil:
		index(GSI1, attrGSI1PK, fileTagGSI(q.BotID, q.Tag[0], q.Tag[1]))
	case q.Order == FileOrderKey:
		in.ExpressionAttributeValues[":pk"] = str(fileKeysPK(q.BotID))
		in.ConsistentRead = aws.Bool(true)
	case q.Order == FileOrderCreatedAt:
		index(GSI1, attrGSI1PK, filesGSI(q.BotID, orderCreated))
	case q.Order == FileOrderUpdatedAt:
		index(GSI2, attrGSI2PK, filesGSI(q.BotID, orderUpdated))
	case q.Order == FileOrderSize:
		index(GSI1, attrGSI1PK, filesGSI(q.BotID, orderSize))
	case q.Order == FileOrderStatus:
		index(GSI2, attrGSI2PK, filesGSI(q.BotID, orderStatus))
	default:
		return nil, nil, fmt.Errorf("list files: unknown order %q", q.Order)
	}
	var out []platform.FileRecord
	budget := fileScanBudget(p.Limit)
	read := 0
	for {
		in.Limit = aws.Int32(p.Limit)
		res, err := s.db.Query(ctx, in)
		if err != nil {
			if isValidation(err) && p.Start != nil {
				return nil, nil, platform.Invalid("invalid nextToken")
			}
			return nil, nil, err
		}
		recs, err := s.filesOf(ctx, q, res.Items)
		if err != nil {
			return nil, nil, err
		}
		for i, it := range res.Items {
			read++
			r, ok := recs[i]
			if !ok || r.BotID != q.BotID || (q.Accept != nil && !q.Accept(r)) {
				continue
			}
			out = append(out, r)
			if len(out) == int(p.Limit) {
				if i == len(res.Items)-1 && len(res.LastEvaluatedKey) == 0 {
					return out, nil, nil
				}
				return out, lastKeyOf(in, []item{it}, nil), nil
			}
		}
		if len(res.LastEvaluatedKey) == 0 {
			return out, nil, nil
		}
		if read >= budget {
			return out, lastKey(res.LastEvaluatedKey), nil
		}
		in.ExclusiveStartKey = res.LastEvaluatedKey
	}
}

// filesOf decodes the files of a page of index items: the items themselves
// carry the doc, except tag-index items, whose records are read in one
// BatchGetItem.
func (s *Store) filesOf(ctx context.Context, q FileScan, items []item) (map[int]platform.FileRecord, error) {
	out := make(map[int]platform.FileRecord, len(items))
	if q.Tag == nil {
		for i, it := range items {
			r, err := fileFrom(it)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	}
	ids := make([]string, len(items))
	for i, it := range items {
		ids[i] = getS(it, attrFFileID)
	}
	recs, err := s.GetFiles(ctx, ids)
	if err != nil {
		return nil, err
	}
	for i, id := range ids {
		if r, ok := recs[id]; ok && r.Tags[q.Tag[0]] == q.Tag[1] {
			out[i] = r
		}
	}
	return out, nil
}

// FileTagCounts reads how many of a bot's files have each (name, value)
// (one BatchGetItem): to pick the most selective tag of a filter.
func (s *Store) FileTagCounts(ctx context.Context, botID string, pairs [][2]string) ([]int64, error) {
	keys := make([]item, len(pairs))
	for i, p := range pairs {
		keys[i] = key(fileTagValuesPK(botID, p[0]), fileSortKey(p[1]))
	}
	items, err := s.batchGet(ctx, keys)
	if err != nil {
		return nil, err
	}
	counts := map[[2]string]int64{}
	for _, it := range items {
		counts[[2]string{getS(it, attrPK), getS(it, attrSK)}] = getN(it, attrFCount)
	}
	out := make([]int64, len(pairs))
	for i, p := range pairs {
		out[i] = counts[[2]string{fileTagValuesPK(botID, p[0]), fileSortKey(p[1])}]
	}
	return out, nil
}

// ListFileTags lists the tag names used by a bot's files (Query of the
// counters, skipping names no file uses any more).
func (s *Store) ListFileTags(ctx context.Context, botID string, p Page) ([]string, map[string]string, error) {
	return s.listCounted(ctx, fileTagNamesPK(botID), p)
}

// ListFileTagValues lists the values of tag name in a bot's files.
func (s *Store) ListFileTagValues(ctx context.Context, botID, name string, p Page) ([]string, map[string]string, error) {
	return s.listCounted(ctx, fileTagValuesPK(botID, name), p)
}

func (s *Store) listCounted(ctx context.Context, pk string, p Page) ([]string, map[string]string, error) {
	in := &dynamodb.QueryInput{
		TableName:                 &s.table,
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: item{":pk": str(pk)},
		ConsistentRead:            aws.Bool(true),
		ExclusiveStartKey:         startKey(p.Start),
	}
	out := []string{}
	budget, read := fileScanBudget(p.Limit), 0
	for {
		in.Limit = aws.Int32(p.Limit)
		res, err := s.db.Query(ctx, in)
		if err != nil {
			if isValidation(err) && p.Start != nil {
				return nil, nil, platform.Invalid("invalid nextToken")
			}
			return nil, nil, err
		}
		for i, it := range res.Items {
			read++
			if getN(it, attrFCount) <= 0 {
				continue // no file uses it any more
			}
			out = append(out, getS(it, attrFName))
			if len(out) == int(p.Limit) {
				if i == len(res.Items)-1 && len(res.LastEvaluatedKey) == 0 {
					return out, nil, nil
				}
				return out, lastKeyOf(in, []item{it}, nil), nil
			}
		}
		if len(res.LastEvaluatedKey) == 0 {
			return out, nil, nil
		}
		if read >= budget {
			return out, lastKey(res.LastEvaluatedKey), nil
		}
		in.ExclusiveStartKey = res.LastEvaluatedKey
	}
}

// PutPassages stores a passage set of a file and its search postings
// (BatchWriteItem): items under the file's partition, postings also in the
// term's gsi1 partition of the bot.
//
// Passages and postings carry no TTL (a file's expiry can change after
// they are written): they go with their file's deletion, and reads ignore
// any whose passage set is not their file's current one.
func (s *Store) PutPassages(ctx context.Context, f platform.FileRecord, set string, passages []platform.IndexedPassage, postings []platform.Posting) error {
	items := make([]item, 0, len(passages)+len(postings))
	for _, p := range passages {
		pos := 0
		if p.Meta.Position != nil {
			pos = *p.Meta.Position
		}
		it, err := docItem(filePK(f.ID), skPassage(set, pos), p.Passage)
		if err != nil {
			return err
		}
		if p.Breadcrumb != "" {
			it[attrFCrumb] = str(p.Breadcrumb)
		}
		items = append(items, it)
	}
	for _, p := range postings {
		var b strings.Builder
		for i, h := range p.Hits {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%d:%d:%d", h.Position, h.Count, h.Length)
		}
		it := key(filePK(f.ID), skTerm(set, p.Term))
		it[attrGSI1PK] = str(fileTermGSI(f.BotID, p.Term))
		it[attrGSI1SK] = str(f.ID + "#" + set)
		it[attrFFileID] = str(f.ID)
		it[attrFHits] = str(b.String())
		it[attrFPassages] = num(int64(len(passages)))
		items = append(items, it)
	}
	return s.batchPut(ctx, items)
}

// DeletePassageSet removes a passage set of a file, its postings and its
// vectors.
func (s *Store) DeletePassageSet(ctx context.Context, fileID, set string) error {
	var keys []item
	for _, prefix := range []string{"PSG#" + set + "#", "TERM#" + set + "#", vectorPrefix(set)} {
		k, err := s.queryAllKeys(ctx, filePK(fileID), prefix)
		if err != nil {
			return err
		}
		keys = append(keys, k...)
	}
	return s.batchDelete(ctx, keys)
}

// ListPassages returns a page of a passage set in order (one Query).
func (s *Store) ListPassages(ctx context.Context, fileID, set string, p Page) ([]platform.Passage, map[string]string, error) {
	items, next, err := s.queryPage(ctx, &dynamodb.QueryInput{
		KeyConditionExpression:    aws.String("pk = :pk AND begins_with(sk, :p)"),
		ExpressionAttributeValues: item{":pk": str(filePK(fileID)), ":p": str("PSG#" + set + "#")},
		ConsistentRead:            aws.Bool(true),
	}, p)
	if err != nil {
		return nil, nil, err
	}
	out := make([]platform.Passage, 0, len(items))
	for _, it := range items {
		var ps platform.Passage
		if err := decodeDoc(it, &ps); err != nil {
			return nil, nil, err
		}
		out = append(out, ps)
	}
	return out, next, nil
}

// PassageRef names a passage of a file's passage set.
type PassageRef struct {
	FileID, Set string
	Position    int
}

// GetPassages reads passages by reference (BatchGetItem); missing ones are
// left out.
func (s *Store) GetPassages(ctx context.Context, refs []PassageRef) (map[PassageRef]platform.IndexedPassage, error) {
	keys := make([]item, 0, len(refs))
	seen := map[PassageRef]bool{}
	for _, r := range refs {
		if !seen[r] && r.Position >= 0 {
			seen[r] = true
			keys = append(keys, key(filePK(r.FileID), skPassage(r.Set, r.Position)))
		}
	}
	items, err := s.batchGet(ctx, keys)
	if err != nil {
		return nil, err
	}
	out := make(map[PassageRef]platform.IndexedPassage, len(items))
	for _, it := range items {
		var ps platform.Passage
		if err := decodeDoc(it, &ps); err != nil {
			return nil, err
		}
		sk := getS(it, attrSK) // PSG#<set>#<pos>
		parts := strings.Split(sk, "#")
		if len(parts) != 3 {
			continue
		}
		pos, _ := strconv.Atoi(parts[2])
		out[PassageRef{FileID: strings.TrimPrefix(getS(it, attrPK), "FILE#"), Set: parts[1], Position: pos}] =
			platform.IndexedPassage{Passage: ps, Breadcrumb: getS(it, attrFCrumb)}
	}
	return out, nil
}

// Postings reads the search postings of term in a bot's files (Query on
// gsi1), at most limit; more reports that the term is in more files.
func (s *Store) Postings(ctx context.Context, botID, term string, limit int) (out []platform.FilePosting, more bool, err error) {
	in := &dynamodb.QueryInput{
		TableName:                 &s.table,
		IndexName:                 aws.String(GSI1),
		KeyConditionExpression:    aws.String("gsi1pk = :pk"),
		ExpressionAttributeValues: item{":pk": str(fileTermGSI(botID, term))},
	}
	for {
		in.Limit = aws.Int32(int32(min(limit+1-len(out), 1000)))
		res, err := s.db.Query(ctx, in)
		if err != nil {
			return nil, false, err
		}
		for _, it := range res.Items {
			if len(out) == limit {
				return out, true, nil
			}
			set, _, _ := strings.Cut(strings.TrimPrefix(getS(it, attrSK), "TERM#"), "#")
			fp := platform.FilePosting{FileID: getS(it, attrFFileID), Set: set, Passages: int(getN(it, attrFPassages))}
			for h := range strings.SplitSeq(getS(it, attrFHits), ",") {
				var hit platform.PostingHit
				if _, err := fmt.Sscanf(h, "%d:%d:%d", &hit.Position, &hit.Count, &hit.Length); err == nil {
					fp.Hits = append(fp.Hits, hit)
				}
			}
			out = append(out, fp)
		}
		if len(res.LastEvaluatedKey) == 0 {
			return out, false, nil
		}
		in.ExclusiveStartKey = res.LastEvaluatedKey
	}
}

// FileTagPartition is the gsi1 partition listing a bot's files with a tag
// value (a continued listing's nextToken names it).
func FileTagPartition(botID, name, value string) string { return fileTagGSI(botID, name, value) }

// fileChildren returns the keys of every item under a file's partition.
func (s *Store) fileChildren(ctx context.Context, id string) ([]item, error) {
	in := &dynamodb.QueryInput{
		TableName:                 &s.table,
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: item{":pk": str(filePK(id))},
		ProjectionExpression:      aws.String("pk, sk"),
		ConsistentRead:            aws.Bool(true),
	}
	return queryAllItems(ctx, s, in)
}
