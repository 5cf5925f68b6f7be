package awsrestore_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/awsrestore"
	"github.com/botforge/platform/shared/mototest"
	"github.com/botforge/platform/shared/runtime"
)

// TestRestoreOneBotFromPointInTimeRecovery: the platform runs over moto
// (DynamoDB and a versioned S3 bucket, standing for AWS); a workspace holds
// two bots with tables, conversations, messages and a file each. The table
// is restored to that point in time into a second table (moto's
// RestoreTableToPointInTime); then one bot is deleted (its data swept, its
// file's contents deleted) and the other changed. Restoring the deleted bot
// from the copy and the bucket's versions brings back exactly its data,
// read through the API (bot, rows, messages, file contents, the
// workspace's bot count), and leaves the other bot's newer data alone. A
// second run changes nothing; a later change of the bot is reported as a
// conflict, not overwritten. Then the other bot is deleted: restoring the
// workspace is refused while its deletion is being finished, and once swept
// puts that bot back as it was at the point in time (the first bot's later
// change still kept, a conflict).
func TestRestoreOneBotFromPointInTimeRecovery(t *testing.T) {
	endpoint := mototest.StartSerial(t)
	for k, v := range map[string]string{"DYNAMODB_ENDPOINT": endpoint, "S3_ENDPOINT": endpoint, "PLATFORM_TABLE": "live", "PLATFORM_BUCKET": "live-files",
		"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1"} {
		t.Setenv(k, v)
	}
	ctx := context.Background()
	cfg, err := runtime.AWSConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	env := runtime.FromEnv()
	db := runtime.DynamoClient(cfg, env, nil)
	s3c := runtime.S3Client(cfg, env)
	e := apitest.New(t)
	if _, err := s3c.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: aws.String("live-files"),
		VersioningConfiguration: &s3types.VersioningConfiguration{Status: s3types.BucketVersioningStatusEnabled}}); err != nil {
		t.Fatal(err)
	}
	tok := e.AdminToken
	ws := e.Check(e.Do(apitest.Req{Method: "POST", Path: "/v1/admin/workspaces", Token: tok, Body: map[string]any{"name": "pitr"}}), 200, "").Str("id")
	wsh := map[string]string{"x-workspace-id": ws}
	type botData struct{ id, file, conv string }
	content := func(b string) []byte { return []byte("contents of " + b + "'s file\n") }
	fill := func(name string) botData {
		id := e.Check(e.Do(apitest.Req{Method: "POST", Path: "/v1/admin/bots", Token: tok, Headers: wsh, Body: map[string]any{"name": name}}), 200, "").Str("bot.id")
		h := map[string]string{"x-bot-id": id}
		e.Check(e.Do(apitest.Req{Method: "POST", Path: "/v1/tables", Token: tok, Headers: h, Body: map[string]any{"name": "notesTable",
			"schema": map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "number"}}}}}), 200, "")
		e.Check(e.Do(apitest.Req{Method: "POST", Path: "/v1/tables/notesTable/rows", Token: tok, Headers: h, Body: map[string]any{"rows": []any{map[string]any{"n": 1}, map[string]any{"n": 2}, map[string]any{"n": 3}}}}), 200, "")
		conv := e.Check(e.Do(apitest.Req{Method: "POST", Path: "/v1/chat/conversations", Token: tok, Headers: h, Body: map[string]any{"channel": "web", "tags": map[string]string{}}}), 201, "").Str("conversation.id")
		user := e.Check(e.Do(apitest.Req{Method: "POST", Path: "/v1/chat/users", Token: tok, Headers: h, Body: map[string]any{"tags": map[string]string{}}}), 201, "").Str("user.id")
		for _, text := range []string{"hello", "again"} {
			e.Check(e.Do(apitest.Req{Method: "POST", Path: "/v1/chat/messages", Token: tok, Headers: h, Body: map[string]any{"conversationId": conv, "userId": user,
				"type": "text", "payload": map[string]any{"text": text}, "tags": map[string]string{}}}), 201, "")
		}
		body := content(name)
		f := e.Check(e.Do(apitest.Req{Method: "PUT", Path: "/v1/files", Token: tok, Headers: h, Body: map[string]any{"key": "doc.txt", "size": len(body)}}), 200, "")
		req, _ := http.NewRequest("PUT", f.Str("file.uploadUrl"), bytes.NewReader(body))
		req.Header.Set("Content-Type", f.Str("file.contentType"))
		res, err := http.DefaultClient.Do(req)
		if err != nil || res.StatusCode != 200 {
			t.Fatalf("upload: %v %v", err, res)
		}
		res.Body.Close()
		// getFile completes the upload (no notification from this S3).
		if st := e.Check(e.Do(apitest.Req{Method: "GET", Path: "/v1/files/" + f.Str("file.id"), Token: tok, Headers: h}), 200, "").Str("file.status"); st != "upload_completed" && st != "indexing_completed" {
			t.Fatalf("file status %s", st)
		}
		return botData{id, f.Str("file.id"), conv}
	}
	a, b := fill("alpha"), fill("beta")
	ha, hb := map[string]string{"x-bot-id": a.id}, map[string]string{"x-bot-id": b.id}

	// The point in time, and the table restored to it into a second table.
	at := time.Now()
	if _, err := db.RestoreTableToPointInTime(ctx, &dynamodb.RestoreTableToPointInTimeInput{SourceTableName: aws.String("live"), TargetTableName: aws.String("restored")}); err != nil {
		t.Fatal(err)
	}
	// S3 dates have a resolution of a second: what follows must be dated
	// after the point in time.
	time.Sleep(1100 * time.Millisecond)

	// Bot alpha deleted (its data swept, its file's contents deleted: a
	// delete marker), bot beta changed.
	e.Check(e.Do(apitest.Req{Method: "DELETE", Path: "/v1/admin/bots/" + a.id, Token: tok, Headers: wsh}), 200, "")
	for deadline := time.Now().Add(60 * time.Second); len(e.ItemsHolding(a.id)) > 0; {
		if time.Now().After(deadline) {
			t.Fatalf("bot alpha's data not swept: %v", e.ItemsHolding(a.id))
		}
		// The scheduled sweep (every pending deletion), on moto.
		if _, err := e.Platform.Sweeper.Run(ctx); err != nil {
			t.Logf("sweep: %v", err)
		}
	}
	if n := countObjects(t, s3c, "files/"+a.id+"/"); n != 0 {
		t.Fatalf("%d objects of the deleted bot left", n)
	}
	e.Check(e.Do(apitest.Req{Method: "POST", Path: "/v1/tables/notesTable/rows", Token: tok, Headers: hb, Body: map[string]any{"rows": []any{map[string]any{"n": 4}}}}), 200, "")
	betaBefore := e.ItemsHolding(b.id)

	opts := awsrestore.Options{DB: db, S3: s3c, From: "restored", Table: "live", Bucket: "live-files", At: at, BotID: a.id}
	dry := opts
	dry.DryRun = true
	rd, err := awsrestore.Run(ctx, dry)
	if err != nil {
		t.Fatal(err)
	}
	if len(e.ItemsHolding(a.id)) != 0 {
		t.Fatal("the dry run wrote")
	}
	r, err := awsrestore.Run(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("restore: %+v", r)
	if r.ItemsRestored == 0 || r.ItemsRestored != rd.ItemsRestored || len(r.ItemConflicts) != 0 || r.ObjectsRestored != 1 || len(r.ObjectConflicts) != 0 {
		t.Fatalf("restore report %+v (dry run %+v)", r, rd)
	}

	// The bot answers again, with its data.
	e.Check(e.Do(apitest.Req{Method: "GET", Path: "/v1/admin/bots/" + a.id, Token: tok, Headers: wsh}), 200, "")
	if rows := e.Check(e.Do(apitest.Req{Method: "POST", Path: "/v1/tables/notesTable/rows/find", Token: tok, Headers: ha, Body: map[string]any{}}), 200, "").List("rows"); len(rows) != 3 {
		t.Fatalf("alpha's rows: %v", rows)
	}
	if msgs := e.Check(e.Do(apitest.Req{Method: "GET", Path: "/v1/chat/messages?conversationId=" + a.conv, Token: tok, Headers: ha}), 200, "").List("messages"); len(msgs) != 2 {
		t.Fatalf("alpha's messages: %v", msgs)
	}
	url := e.Check(e.Do(apitest.Req{Method: "GET", Path: "/v1/files/" + a.file, Token: tok, Headers: ha}), 200, "").Str("file.url")
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !bytes.Equal(got, content("alpha")) {
		t.Fatalf("alpha's file: %d %q", res.StatusCode, got)
	}
	if n := botCount(t, db, ws); n != "2" {
		t.Fatalf("the workspace counts %s bots, want 2", n)
	}
	// Beta untouched: its newer row is there, its items as before.
	if rows := e.Check(e.Do(apitest.Req{Method: "POST", Path: "/v1/tables/notesTable/rows/find", Token: tok, Headers: hb, Body: map[string]any{}}), 200, "").List("rows"); len(rows) != 4 {
		t.Fatalf("beta's rows: %v", rows)
	}
	if after := e.ItemsHolding(b.id); strings.Join(after, "\n") != strings.Join(betaBefore, "\n") {
		t.Fatalf("beta's items changed:\n%v\n%v", betaBefore, after)
	}

	// Idempotent.
	r2, err := awsrestore.Run(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if r2.ItemsRestored != 0 || r2.ObjectsRestored != 0 || len(r2.ItemConflicts) != 0 || r2.ItemsUnchanged != r.ItemsRestored || r2.ObjectsUnchanged != 1 {
		t.Fatalf("second run %+v, first %+v", r2, r)
	}
	// A later change is a conflict, reported and kept.
	e.Check(e.Do(apitest.Req{Method: "PUT", Path: "/v1/admin/bots/" + a.id, Token: tok, Headers: wsh, Body: map[string]any{"name": "alpha renamed"}}), 200, "")
	r3, err := awsrestore.Run(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(r3.ItemConflicts) != 1 || !strings.HasPrefix(r3.ItemConflicts[0], "BOT#"+a.id+" / BOT") {
		t.Fatalf("conflicts %v", r3.ItemConflicts)
	}
	if name := e.Check(e.Do(apitest.Req{Method: "GET", Path: "/v1/admin/bots/" + a.id, Token: tok, Headers: wsh}), 200, "").Str("bot.name"); name != "alpha renamed" {
		t.Fatalf("the conflicting change was overwritten: %s", name)
	}
	// The workspace: bot beta deleted, its deletion not yet swept: refused
	// (the sweeper would delete what is put back).
	wsOpts := awsrestore.Options{DB: db, S3: s3c, From: "restored", Table: "live", Bucket: "live-files", At: at, WorkspaceID: ws}
	e.Check(e.Do(apitest.Req{Method: "DELETE", Path: "/v1/admin/bots/" + b.id, Token: tok, Headers: wsh}), 200, "")
	if len(e.ItemsHolding(b.id)) > 0 { // the marker is still there: the sweep has not finished
		if _, err := awsrestore.Run(ctx, wsOpts); err == nil || !strings.Contains(err.Error(), "still being finished") {
			t.Fatalf("a restore during the deletion: %v", err)
		}
	}
	for deadline := time.Now().Add(60 * time.Second); len(e.ItemsHolding(b.id)) > 0; {
		if time.Now().After(deadline) {
			t.Fatalf("bot beta's data not swept: %v", e.ItemsHolding(b.id))
		}
		if _, err := e.Platform.Sweeper.Run(ctx); err != nil {
			t.Logf("sweep: %v", err)
		}
	}
	rw, err := awsrestore.Run(ctx, wsOpts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("workspace restore: %+v", rw)
	if len(rw.Bots) != 2 || rw.ItemsRestored == 0 || rw.ObjectsRestored != 1 || len(rw.ItemConflicts) != 2 {
		t.Fatalf("workspace restore %+v", rw)
	}
	// Beta as it was at the point in time (its later row is not in the
	// copy), alpha's later rename kept (a conflict, with the workspace's
	// own item: its botCount moved since).
	if rows := e.Check(e.Do(apitest.Req{Method: "POST", Path: "/v1/tables/notesTable/rows/find", Token: tok, Headers: hb, Body: map[string]any{}}), 200, "").List("rows"); len(rows) != 3 {
		t.Fatalf("beta's rows: %v", rows)
	}
	if n := botCount(t, db, ws); n != "2" {
		t.Fatalf("the workspace counts %s bots, want 2", n)
	}
	if name := e.Check(e.Do(apitest.Req{Method: "GET", Path: "/v1/admin/bots/" + a.id, Token: tok, Headers: wsh}), 200, "").Str("bot.name"); name != "alpha renamed" {
		t.Fatalf("alpha: %s", name)
	}

	// Bad requests are refused before anything is read.
	for _, o := range []awsrestore.Options{{DB: db, From: "restored", Table: "live"}, {DB: db, From: "live", Table: "live", BotID: a.id}} {
		if _, err := awsrestore.Run(ctx, o); err == nil {
			t.Fatalf("%+v accepted", o)
		}
	}
}

func countObjects(t *testing.T, c *s3.Client, prefix string) int {
	t.Helper()
	out, err := c.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String("live-files"), Prefix: aws.String(prefix)})
	if err != nil {
		t.Fatal(err)
	}
	return len(out.Contents)
}

func botCount(t *testing.T, db *dynamodb.Client, ws string) string {
	t.Helper()
	out, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String("live"), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "WS#" + ws}, "sk": &types.AttributeValueMemberS{Value: "WS"}}})
	if err != nil {
		t.Fatal(err)
	}
	n, _ := out.Item["botCount"].(*types.AttributeValueMemberN)
	if n == nil {
		return ""
	}
	return n.Value
}
