// Package awsrestore restores one bot or one workspace on AWS from the
// table's point-in-time recovery and the bucket's object versions, without
// touching anything else (docs/backup.md, "On AWS").
//
// DynamoDB restores a point in time into a new table only, never in place.
// So the operator restores the live table into a second table (aws dynamodb
// restore-table-to-point-in-time), and Run copies exactly the items of the
// bot or workspace from that copy back into the live table, and the object
// versions that were current at that time back into the live bucket:
//
//   - the items: those of the copy in which a string attribute holds the
//     bot's id (a workspace: its id or the id of one of its bots in the
//     copy), as the deletion tests define what a bot's data is ("no stored
//     item holds the bot's id", docs/data-model.md); left out are audit
//     records (they outlive what they name), deletion markers, limit
//     counters, stream signals and the outbox (pending deliveries of the
//     past are not sent again);
//   - an item missing from the live table is put (conditional on still
//     being missing); an equal one is left; a different one is a conflict:
//     reported, never overwritten (the live data is newer than the copy);
//   - a bot put back counts in its workspace's botCount again (the ADD in
//     the same transaction, conditional on the workspace existing), as
//     createBot does;
//   - the objects: under files/<bot>/ and code/bots/<bot>/, the version
//     current at the time given (At) is copied over the live key when the
//     key has no current version (deleted: a delete marker) or is missing;
//     a key whose current version is another is a conflict, reported.
//
// A bot or workspace whose deletion is still being finished (a deletion
// marker in the live table) is refused: the sweeper would delete what the
// restore puts back. Run is idempotent: a second run finds everything
// unchanged. DryRun reports what would change and writes nothing.
package awsrestore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// Options say what to restore from where.
type Options struct {
	DB *dynamodb.Client
	S3 *s3.Client // nil: no objects restored
	// From is the table the point-in-time recovery restored into; Table
	// the live one.
	From, Table string
	// Bucket is the live bucket (versioning enabled); At the point in time
	// whose object versions are restored (the one the table was restored
	// to).
	Bucket string
	At     time.Time
	// Exactly one of BotID and WorkspaceID.
	BotID, WorkspaceID string
	DryRun             bool
}

// Report says what Run did (or, with DryRun, would do).
type Report struct {
	Bots []string `json:"bots"` // the bots restored (a workspace's, from the copy)

	ItemsRestored  int      `json:"itemsRestored"`
	ItemsUnchanged int      `json:"itemsUnchanged"`
	ItemConflicts  []string `json:"itemConflicts"` // "pk / sk" of items changed since

	ObjectsRestored  int      `json:"objectsRestored"`
	ObjectsUnchanged int      `json:"objectsUnchanged"`
	ObjectConflicts  []string `json:"objectConflicts"` // keys with another current version
	DryRun           bool     `json:"dryRun"`
}

// skipped are partitions never copied back (see the package comment).
var skipped = []string{"AUDIT#", "DELETIONS", "LIMIT#", "CHATSIG#", "LISTEN#", "INBOX#", "OUTBOX#"}

// Run restores the bot or workspace of o.
func Run(ctx context.Context, o Options) (Report, error) {
	r := Report{DryRun: o.DryRun, ItemConflicts: []string{}, ObjectConflicts: []string{}}
	if (o.BotID == "") == (o.WorkspaceID == "") {
		return r, errors.New("name exactly one bot or one workspace")
	}
	if o.From == "" || o.Table == "" || o.From == o.Table {
		return r, errors.New("name the restored copy and the live table (two different tables)")
	}
	ids := []string{o.BotID}
	if o.WorkspaceID != "" {
		bots, err := botsOf(ctx, o.DB, o.From, o.WorkspaceID)
		if err != nil {
			return r, err
		}
		r.Bots = bots
		ids = append([]string{o.WorkspaceID}, bots...)
	} else {
		r.Bots = []string{o.BotID}
	}
	if err := checkNoDeletion(ctx, o.DB, o.Table, ids); err != nil {
		return r, err
	}
	items, err := selectItems(ctx, o.DB, o.From, ids)
	if err != nil {
		return r, err
	}
	if len(items) == 0 {
		return r, fmt.Errorf("the table %s holds no item of %s: is it the right copy?", o.From, strings.Join(ids, ", "))
	}
	// The workspace first (its botCount is the copy's), then the bots,
	// then the rest, so that nothing is put back before what owns it.
	rank := func(it map[string]types.AttributeValue) int {
		switch str(it, "sk") {
		case "WS":
			return 0
		case "BOT":
			return 1
		}
		return 2
	}
	sort.SliceStable(items, func(i, j int) bool { return rank(items[i]) < rank(items[j]) })
	wsRestored := false
	for _, it := range items {
		key := map[string]types.AttributeValue{"pk": it["pk"], "sk": it["sk"]}
		name := str(it, "pk") + " / " + str(it, "sk")
		live, err := o.DB.GetItem(ctx, &dynamodb.GetItemInput{TableName: &o.Table, Key: key, ConsistentRead: aws.Bool(true)})
		if err != nil {
			return r, err
		}
		switch {
		case live.Item == nil:
		case reflect.DeepEqual(live.Item, it):
			r.ItemsUnchanged++
			continue
		default:
			r.ItemConflicts = append(r.ItemConflicts, name)
			continue
		}
		isWS, isBot := str(it, "sk") == "WS" && strings.HasPrefix(str(it, "pk"), "WS#"), str(it, "sk") == "BOT" && strings.HasPrefix(str(it, "pk"), "BOT#")
		if o.DryRun {
			r.ItemsRestored++
			wsRestored = wsRestored || isWS
			continue
		}
		put := &types.Put{TableName: &o.Table, Item: it, ConditionExpression: aws.String("attribute_not_exists(pk)")}
		var err2 error
		if isBot && !wsRestored {
			ws := str(it, "workspaceId")
			_, err2 = o.DB.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
				{Put: put},
				{Update: &types.Update{TableName: &o.Table, Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "WS#" + ws}, "sk": &types.AttributeValueMemberS{Value: "WS"}},
					UpdateExpression: aws.String("ADD botCount :one"), ConditionExpression: aws.String("attribute_exists(pk)"),
					ExpressionAttributeValues: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}}}},
			}})
			var canceled *types.TransactionCanceledException
			if errors.As(err2, &canceled) && len(canceled.CancellationReasons) == 2 && aws.ToString(canceled.CancellationReasons[1].Code) == "ConditionalCheckFailed" {
				return r, fmt.Errorf("the workspace %s of bot %s is not in the live table: restore the workspace (--workspace %s)", ws, str(it, "pk")[4:], ws)
			}
		} else {
			_, err2 = o.DB.PutItem(ctx, &dynamodb.PutItemInput{TableName: put.TableName, Item: put.Item, ConditionExpression: put.ConditionExpression})
		}
		var ccf *types.ConditionalCheckFailedException
		var canceled *types.TransactionCanceledException
		if errors.As(err2, &ccf) || errors.As(err2, &canceled) {
			r.ItemConflicts = append(r.ItemConflicts, name+" (written meanwhile)")
			continue
		}
		if err2 != nil {
			return r, fmt.Errorf("%s: %w", name, err2)
		}
		r.ItemsRestored++
		wsRestored = wsRestored || isWS
	}
	if o.S3 != nil && o.Bucket != "" {
		if o.At.IsZero() {
			return r, errors.New("the point in time of the object versions (At) is required with a bucket")
		}
		for _, bot := range r.Bots {
			for _, prefix := range []string{"files/" + bot + "/", "code/bots/" + bot + "/"} {
				if err := restoreObjects(ctx, o, prefix, &r); err != nil {
					return r, err
				}
			}
		}
	}
	return r, nil
}

func str(it map[string]types.AttributeValue, k string) string {
	if v, ok := it[k].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// botsOf lists the bots of a workspace in the copy (a Scan of the copy:
// it is a table of its own, read once).
func botsOf(ctx context.Context, db *dynamodb.Client, table, ws string) ([]string, error) {
	var bots []string
	in := &dynamodb.ScanInput{TableName: &table, FilterExpression: aws.String("sk = :bot AND workspaceId = :ws"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":bot": &types.AttributeValueMemberS{Value: "BOT"}, ":ws": &types.AttributeValueMemberS{Value: ws}}}
	p := dynamodb.NewScanPaginator(db, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", table, err)
		}
		for _, it := range page.Items {
			if pk := str(it, "pk"); strings.HasPrefix(pk, "BOT#") {
				bots = append(bots, strings.TrimPrefix(pk, "BOT#"))
			}
		}
	}
	sort.Strings(bots)
	return bots, nil
}

// checkNoDeletion refuses ids whose deletion is still being finished.
func checkNoDeletion(ctx context.Context, db *dynamodb.Client, table string, ids []string) error {
	p := dynamodb.NewQueryPaginator(db, &dynamodb.QueryInput{TableName: &table, KeyConditionExpression: aws.String("pk = :d"), ConsistentRead: aws.Bool(true),
		ExpressionAttributeValues: map[string]types.AttributeValue{":d": &types.AttributeValueMemberS{Value: "DELETIONS"}}})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return err
		}
		for _, it := range page.Items {
			for _, id := range ids {
				if strings.Contains(str(it, "sk"), id) {
					return fmt.Errorf("the deletion of %s is still being finished in %s (marker %s): wait for the sweeper, then restore", id, table, str(it, "sk"))
				}
			}
		}
	}
	return nil
}

// owned are the prefixes of the ids of what a bot owns (shared/platform):
// a partition whose key holds one (a table's rows, a file's passages, an
// issue's events) is the bot's even when none of its attributes names the
// bot. Integrations (intver_, iak_, whk_, intop_) belong to the workspace,
// accounts and tokens to people: never followed.
var owned = []string{"table_", "tablejob_", "file_", "kb_", "iss_", "issevt_", "conv_", "user_", "msg_", "evt_", "state_", "task_", "activity_", "wflow_", "bak_"}

// selectItems scans the copy for the items in which a string attribute
// holds one of ids, then, until nothing new is found, for the partitions
// whose key holds an id those items' keys name (owned). Each round is one
// Scan of the copy.
func selectItems(ctx context.Context, db *dynamodb.Client, table string, ids []string) ([]map[string]types.AttributeValue, error) {
	items, err := scanCopy(ctx, db, table, ids, false)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, it := range items {
		seen[str(it, "pk")+"\x00"+str(it, "sk")] = true
	}
	followed := map[string]bool{}
	for _, id := range ids {
		followed[id] = true
	}
	for round := 0; round < 5; round++ {
		var next []string
		for _, it := range items {
			for _, k := range []string{str(it, "pk"), str(it, "sk")} {
				for _, part := range strings.Split(k, "#") {
					for _, p := range owned {
						if strings.HasPrefix(part, p) && !followed[part] {
							followed[part] = true
							next = append(next, part)
						}
					}
				}
			}
		}
		if len(next) == 0 {
			return items, nil
		}
		more, err := scanCopy(ctx, db, table, next, true)
		if err != nil {
			return nil, err
		}
		for _, it := range more {
			if k := str(it, "pk") + "\x00" + str(it, "sk"); !seen[k] {
				seen[k] = true
				items = append(items, it)
			}
		}
	}
	return items, nil
}

// scanCopy scans the copy for the items in which a string attribute (the
// partition key only, with pkOnly) holds one of ids.
func scanCopy(ctx context.Context, db *dynamodb.Client, table string, ids []string, pkOnly bool) ([]map[string]types.AttributeValue, error) {
	var out []map[string]types.AttributeValue
	p := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{TableName: &table})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", table, err)
		}
	items:
		for _, it := range page.Items {
			pk := str(it, "pk")
			for _, s := range skipped {
				if strings.HasPrefix(pk, s) {
					continue items
				}
			}
			for name, v := range it {
				if pkOnly && name != "pk" {
					continue
				}
				s, ok := v.(*types.AttributeValueMemberS)
				if !ok {
					continue
				}
				for _, id := range ids {
					if id != "" && strings.Contains(s.Value, id) {
						out = append(out, it)
						continue items
					}
				}
			}
		}
	}
	return out, nil
}

// restoreObjects puts back, for each key under prefix, the version that
// was current at o.At.
func restoreObjects(ctx context.Context, o Options, prefix string, r *Report) error {
	type entry struct {
		version  string
		modified time.Time
		deleted  bool
		latest   bool
		etag     string
	}
	byKey := map[string][]entry{}
	p := s3.NewListObjectVersionsPaginator(o.S3, &s3.ListObjectVersionsInput{Bucket: &o.Bucket, Prefix: &prefix})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("listing the versions under %s: %w", prefix, err)
		}
		for _, v := range page.Versions {
			byKey[aws.ToString(v.Key)] = append(byKey[aws.ToString(v.Key)], entry{aws.ToString(v.VersionId), aws.ToTime(v.LastModified), false, aws.ToBool(v.IsLatest), aws.ToString(v.ETag)})
		}
		for _, m := range page.DeleteMarkers {
			byKey[aws.ToString(m.Key)] = append(byKey[aws.ToString(m.Key)], entry{aws.ToString(m.VersionId), aws.ToTime(m.LastModified), true, aws.ToBool(m.IsLatest), ""})
		}
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		var then, latest *entry
		for i := range byKey[key] {
			e := &byKey[key][i]
			if e.latest {
				latest = e
			}
			if !e.modified.After(o.At) && (then == nil || e.modified.After(then.modified)) {
				then = e
			}
		}
		if then == nil || then.deleted {
			continue // the key did not exist then: whatever it holds now is newer
		}
		switch {
		case latest != nil && !latest.deleted && (latest.version == then.version || latest.etag == then.etag):
			r.ObjectsUnchanged++
			continue
		case latest != nil && !latest.deleted:
			r.ObjectConflicts = append(r.ObjectConflicts, key)
			continue
		}
		if o.DryRun {
			r.ObjectsRestored++
			continue
		}
		segs := strings.Split(key, "/")
		for i := range segs {
			segs[i] = url.PathEscape(segs[i]) // CopySource is URL-encoded
		}
		src := o.Bucket + "/" + strings.Join(segs, "/") + "?versionId=" + url.QueryEscape(then.version)
		if _, err := o.S3.CopyObject(ctx, &s3.CopyObjectInput{Bucket: &o.Bucket, Key: aws.String(key), CopySource: aws.String(src), MetadataDirective: s3types.MetadataDirectiveCopy}); err != nil {
			return fmt.Errorf("copying %s version %s back: %w", key, then.version, err)
		}
		r.ObjectsRestored++
	}
	return nil
}
