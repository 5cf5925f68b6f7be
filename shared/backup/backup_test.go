package backup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/botforge/platform/shared/localdynamo"
	"github.com/botforge/platform/shared/locals3"
	"github.com/botforge/platform/shared/sdkhttp"
)

// stores is a data directory's embedded DynamoDB and S3, served over
// loopback, with SDK clients.
type stores struct {
	st  Stores
	ddb *dynamodb.Client
	s3  *s3.Client
}

func openStores(t *testing.T, dataDir string) *stores {
	t.Helper()
	d, err := localdynamo.OpenWith(filepath.Join(dataDir, dynamoDir), localdynamo.Options{MinFreeBytes: -1})
	if err != nil {
		t.Fatalf("open DynamoDB (no repair may be needed): %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	o, err := locals3.Open(locals3.Options{Dir: filepath.Join(dataDir, s3Dir), Region: "us-east-1", AccessKeyID: "k", SecretAccessKey: "secret", MinFreeBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = o.Close() })
	if err := o.EnsureBucket(context.Background(), "bkt"); err != nil {
		t.Fatal(err)
	}
	dh, sh := httptest.NewServer(d), httptest.NewServer(o)
	t.Cleanup(dh.Close)
	t.Cleanup(sh.Close)
	hc := sdkhttp.Shield(&http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}})
	creds := credentials.NewStaticCredentialsProvider("k", "secret", "")
	ddb := dynamodb.New(dynamodb.Options{Region: "us-east-1", Credentials: creds, BaseEndpoint: aws.String(dh.URL), HTTPClient: hc, Retryer: aws.NopRetryer{}})
	sc := s3.New(s3.Options{Region: "us-east-1", Credentials: creds, BaseEndpoint: aws.String(sh.URL), UsePathStyle: true, HTTPClient: hc, RetryMaxAttempts: 1})
	return &stores{st: Stores{Dynamo: d, S3: o}, ddb: ddb, s3: sc}
}

func (s *stores) close() {
	_ = s.st.Dynamo.Close()
	_ = s.st.S3.Close()
}

func createTable(t *testing.T, db *dynamodb.Client) {
	t.Helper()
	_, err := db.CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName:            aws.String("tbl"),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}, {AttributeName: aws.String("sk"), AttributeType: types.ScalarAttributeTypeN}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}, {AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange}},
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestBackupDuringWritesIsConsistent: writers each upload an object and
// then write the record naming it (as a file's upload completes), counting
// what was acknowledged; a backup taken meanwhile, restored into another
// directory, opens (no repair), holds every record acknowledged before the
// backup started, each writer's records without a gap, and the object of
// every record it holds.
func TestBackupDuringWritesIsConsistent(t *testing.T) {
	dataDir, backupDir := t.TempDir(), t.TempDir()
	live := openStores(t, dataDir)
	createTable(t, live.ddb)
	// Other entries of the data directory: copied; a log line being
	// appended is left out.
	os.WriteFile(filepath.Join(dataDir, "secrets.json"), []byte(`{"k":"v"}`), 0o600)
	os.MkdirAll(filepath.Join(dataDir, "logs", "bot"), 0o700)
	os.WriteFile(filepath.Join(dataDir, "logs", "bot", "10.log"), []byte("line 1\nline 2\npartial"), 0o600)
	os.MkdirAll(filepath.Join(dataDir, workersDir), 0o700)
	os.WriteFile(filepath.Join(dataDir, workersDir, "scratch"), []byte("x"), 0o600)

	const writers = 8
	var acked [writers]atomic.Int64
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errc := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := int64(1); ctx.Err() == nil; k++ {
				key := fmt.Sprintf("w%d/%d", w, k)
				body := bytes.Repeat([]byte{byte(k)}, 100+int(k%7)*300)
				if _, err := live.s3.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String(key), Body: bytes.NewReader(body)}); err != nil {
					errc <- err
					return
				}
				_, err := live.ddb.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String("tbl"), Item: map[string]types.AttributeValue{
					"pk": &types.AttributeValueMemberS{Value: "w" + strconv.Itoa(w)}, "sk": &types.AttributeValueMemberN{Value: strconv.FormatInt(k, 10)},
					"object": &types.AttributeValueMemberS{Value: key}, "size": &types.AttributeValueMemberN{Value: strconv.Itoa(len(body))},
				}})
				if err != nil {
					errc <- err
					return
				}
				acked[w].Store(k)
			}
		}()
	}
	// Wait until every writer has written something: the backup is
	// taken with writes going on.
	for w := range writers {
		for acked[w].Load() < 20 {
			select {
			case err := <-errc:
				t.Fatal(err)
			default:
				time.Sleep(time.Millisecond)
			}
		}
	}
	var before [writers]int64
	for w := range writers {
		before[w] = acked[w].Load()
	}
	b, err := Take(live.st, dataDir, backupDir, false)
	if err != nil {
		t.Fatal(err)
	}
	var after [writers]int64
	for w := range writers {
		after[w] = acked[w].Load()
	}
	// Keep writing a little after the backup, then stop.
	for acked[0].Load() < after[0]+10 {
		time.Sleep(time.Millisecond)
	}
	stop()
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if b.Size <= 0 || b.Objects == 0 {
		t.Fatalf("backup %+v: want a size and objects", b)
	}
	// Private, as the data directory is (secrets, chat content).
	filepath.WalkDir(filepath.Join(backupDir, b.Name), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		if fi, _ := d.Info(); fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s is %v: readable by others", p, fi.Mode().Perm())
		}
		return nil
	})
	list, err := List(backupDir)
	if err != nil || len(list) != 1 || list[0].Name != b.Name || list[0].Size != b.Size {
		t.Fatalf("List = %+v, %v; want the one backup %+v", list, err, b)
	}

	// Restore into a fresh directory and open it as the platform would.
	restored := t.TempDir()
	p, err := Resolve(backupDir, b.Name)
	if err != nil {
		t.Fatal(err)
	}
	if aside, err := Restore(p, restored); err != nil || aside != "" {
		t.Fatalf("Restore = %q, %v", aside, err)
	}
	if _, err := os.Stat(filepath.Join(restored, workersDir)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("workers' scratch files were backed up: %v", err)
	}
	if raw, _ := os.ReadFile(filepath.Join(restored, "logs", "bot", "10.log")); string(raw) != "line 1\nline 2\n" {
		t.Errorf("log copied as %q, want its complete lines", raw)
	}
	if raw, _ := os.ReadFile(filepath.Join(restored, "secrets.json")); string(raw) != `{"k":"v"}` {
		t.Errorf("secrets.json copied as %q", raw)
	}
	r := openStores(t, restored)
	total := 0
	for w := range writers {
		out, err := r.ddb.Query(context.Background(), &dynamodb.QueryInput{
			TableName: aws.String("tbl"), KeyConditionExpression: aws.String("pk = :p"), ConsistentRead: aws.Bool(true),
			ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: "w" + strconv.Itoa(w)}},
		})
		if err != nil {
			t.Fatal(err)
		}
		n := int64(len(out.Items))
		if out.LastEvaluatedKey != nil {
			t.Fatal("more than a page: make the test write less")
		}
		if n < before[w] || n > after[w]+1 {
			t.Errorf("writer %d: %d records restored; acknowledged before the backup %d, after it %d", w, n, before[w], after[w])
		}
		for i, it := range out.Items {
			k, _ := strconv.ParseInt(it["sk"].(*types.AttributeValueMemberN).Value, 10, 64)
			if k != int64(i+1) {
				t.Fatalf("writer %d: record %d is %d: a gap", w, i+1, k)
			}
			key := it["object"].(*types.AttributeValueMemberS).Value
			obj, err := r.s3.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String(key)})
			if err != nil {
				t.Fatalf("record %s restored without its object: %v", key, err)
			}
			body, _ := io.ReadAll(obj.Body)
			obj.Body.Close()
			if want := 100 + int(k%7)*300; len(body) != want || body[0] != byte(k) {
				t.Fatalf("object %s: %d bytes, want %d", key, len(body), want)
			}
		}
		total += int(n)
	}
	t.Logf("%d records restored; backup %d bytes, %d objects", total, b.Size, b.Objects)

	// The live directory goes on: the backup shares no file it writes.
	live.close()
	l2 := openStores(t, dataDir)
	if _, err := l2.ddb.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String("tbl"), Item: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "after"}, "sk": &types.AttributeValueMemberN{Value: "1"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := Resolve(backupDir, b.Name); err != nil {
		t.Fatal(err)
	}
}

// TestRestoreRefusesARunningPlatform: a directory whose stores are open is
// not restored over, nor backed up by TakeStopped; once closed it is, and
// its previous state is moved aside, not deleted.
func TestRestoreRefusesARunningPlatform(t *testing.T) {
	dataDir, backupDir := t.TempDir(), t.TempDir()
	s := openStores(t, dataDir)
	createTable(t, s.ddb)
	b, err := Take(s.st, dataDir, backupDir, false)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(backupDir, b.Name)
	if _, err := Restore(p, dataDir); !errors.Is(err, ErrRunning) {
		t.Fatalf("Restore over a running platform = %v, want ErrRunning", err)
	}
	if _, err := TakeStopped(dataDir, backupDir); !errors.Is(err, ErrRunning) {
		t.Fatalf("TakeStopped of a running platform = %v, want ErrRunning", err)
	}
	if _, err := Take(s.st, dataDir, filepath.Join(dataDir, "bk"), false); err == nil {
		t.Fatal("a backup directory inside the data directory was accepted")
	}
	s.close()
	b2, err := TakeStopped(dataDir, backupDir)
	if err != nil {
		t.Fatal(err)
	}
	aside, err := Restore(filepath.Join(backupDir, b2.Name), dataDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(aside, dynamoDir)); err != nil {
		t.Fatalf("the replaced state is not in %s: %v", aside, err)
	}
	if _, err := Resolve(backupDir, "backup-nope"); err == nil {
		t.Fatal("an unknown backup resolved")
	}
	openStores(t, dataDir)
}

// TestStagedRestore: a restore staged while the platform runs happens at
// the next start (ApplyPending), once.
func TestStagedRestore(t *testing.T) {
	dataDir, backupDir := t.TempDir(), t.TempDir()
	s := openStores(t, dataDir)
	createTable(t, s.ddb)
	put := func(db *dynamodb.Client, pk string) {
		t.Helper()
		if _, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String("tbl"), Item: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: pk}, "sk": &types.AttributeValueMemberN{Value: "1"}}}); err != nil {
			t.Fatal(err)
		}
	}
	put(s.ddb, "in-backup")
	m := &Manager{Stores: s.st, DataDir: dataDir, Dir: backupDir}
	b, err := m.Take(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	put(s.ddb, "after-backup")
	if err := m.StageRestore("backup-20000101T000000.000Z"); err == nil {
		t.Fatal("staging an unknown backup succeeded")
	}
	if err := m.StageRestore("../x"); err == nil {
		t.Fatal("staging a path succeeded")
	}
	if err := m.StageRestore(b.Name); err != nil {
		t.Fatal(err)
	}
	st, _ := m.Status()
	if st.PendingRestore != b.Name || len(st.Backups) != 1 {
		t.Fatalf("Status = %+v", st)
	}
	s.close()
	restored, _, err := ApplyPending(dataDir)
	if err != nil || filepath.Base(restored) != b.Name {
		t.Fatalf("ApplyPending = %q, %v", restored, err)
	}
	if again, _, _ := ApplyPending(dataDir); again != "" {
		t.Fatalf("the staged restore ran twice (%s)", again)
	}
	r := openStores(t, dataDir)
	for pk, want := range map[string]bool{"in-backup": true, "after-backup": false} {
		out, err := r.ddb.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String("tbl"), Key: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: pk}, "sk": &types.AttributeValueMemberN{Value: "1"}}})
		if err != nil {
			t.Fatal(err)
		}
		if (out.Item != nil) != want {
			t.Errorf("%s present = %v after the restore, want %v", pk, out.Item != nil, want)
		}
	}
}

// TestScheduleAndRetention: the schedule takes backups every Every and
// keeps the newest Keep.
func TestScheduleAndRetention(t *testing.T) {
	dataDir, backupDir := t.TempDir(), t.TempDir()
	s := openStores(t, dataDir)
	createTable(t, s.ddb)
	m := &Manager{Stores: s.st, DataDir: dataDir, Dir: backupDir, Every: 20 * time.Millisecond, Keep: 3,
		OnError: func(err error) { t.Errorf("scheduled backup: %v", err) }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var taken []string
	seen := map[string]bool{}
	go func() { defer close(done); m.Run(ctx) }()
	// Wait for seven distinct scheduled backups to have existed.
	deadline := time.Now().Add(60 * time.Second)
	for len(seen) < 7 && time.Now().Before(deadline) {
		all, err := List(backupDir)
		if err != nil {
			t.Fatal(err)
		}
		// The newest is complete (renamed into place) just before the
		// oldest is pruned: four for an instant.
		if len(all) > 4 {
			t.Errorf("%d backups kept, want at most 3 (+1 being pruned)", len(all))
			break
		}
		for _, b := range all {
			if !b.Scheduled {
				t.Fatalf("%s not marked scheduled", b.Name)
			}
			if !seen[b.Name] {
				seen[b.Name] = true
				taken = append(taken, b.Name)
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	if len(seen) < 7 {
		t.Fatalf("%d scheduled backups in 60 s", len(seen))
	}
	all, _ := List(backupDir)
	if len(all) != 3 {
		t.Fatalf("%d backups left, want 3", len(all))
	}
	// The ones kept are the newest.
	for _, b := range all {
		if !seen[b.Name] {
			taken = append(taken, b.Name)
		}
	}
	sort.Strings(taken)
	for i, b := range all {
		if want := taken[len(taken)-1-i]; b.Name != want {
			t.Fatalf("kept %s, want the newest (%s)", b.Name, want)
		}
	}
	// An interrupted backup (no manifest) is not listed and is removed by
	// the next one.
	os.Mkdir(filepath.Join(backupDir, "backup-20990101T000000.000Z.partial"), 0o700)
	if _, err := m.Take(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(backupDir, "backup-20990101T000000.000Z.partial")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a partial backup was left")
	}
}

// TestBackupMeasure (BACKUP_MEASURE=<items>) measures a backup and a
// restore of a store of that many 1 KB items and a thousand 10 KB objects:
// docs/backup.md's figures.
func TestBackupMeasure(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("BACKUP_MEASURE"))
	if n == 0 {
		t.Skip("BACKUP_MEASURE=<items> measures")
	}
	dataDir, backupDir := t.TempDir(), t.TempDir()
	s := openStores(t, dataDir)
	createTable(t, s.ddb)
	pad := strings.Repeat("x", 1000)
	for i := 0; i < n; i += 25 {
		var reqs []types.WriteRequest
		for j := i; j < i+25 && j < n; j++ {
			reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: map[string]types.AttributeValue{
				"pk": &types.AttributeValueMemberS{Value: "p" + strconv.Itoa(j%1000)}, "sk": &types.AttributeValueMemberN{Value: strconv.Itoa(j)}, "pad": &types.AttributeValueMemberS{Value: pad}}}})
		}
		if _, err := s.ddb.BatchWriteItem(context.Background(), &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{"tbl": reqs}}); err != nil {
			t.Fatal(err)
		}
	}
	body := bytes.Repeat([]byte("y"), 10<<10)
	for i := range 1000 {
		if _, err := s.s3.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("o/" + strconv.Itoa(i)), Body: bytes.NewReader(body)}); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Now()
	b, err := Take(s.st, dataDir, backupDir, false)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(t0)
	m, _ := readManifest(filepath.Join(backupDir, b.Name))
	s.close()
	t1 := time.Now()
	if _, err := Restore(filepath.Join(backupDir, b.Name), t.TempDir()); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d items, 1000 objects: backup %v (S3 writes paused %d ms), %.1f MiB listed in %d files; restore %v", n, took.Round(time.Millisecond), m.PauseMillis, float64(b.Size)/(1<<20), m.Files, time.Since(t1).Round(time.Millisecond))
}
