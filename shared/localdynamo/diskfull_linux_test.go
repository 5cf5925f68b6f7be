package localdynamo

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TestRealDiskFull fills a small tmpfs for real (root only: it mounts one):
// writes are refused with InsufficientStorageException, never a 500, before
// the store itself meets ENOSPC; acknowledged data stays readable; freeing
// space lets writes go on without a restart.
func TestRealDiskFull(t *testing.T) {
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (needs root): %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", mnt).Run() })
	srv, err := OpenWith(filepath.Join(mnt, "db"), Options{MinFreeBytes: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	e := serveEnv(t, srv)
	createTable(t, e.db, "main")
	// Ballast leaves about 16 MiB free.
	ballast := filepath.Join(mnt, "ballast")
	f, err := os.Create(ballast)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	for {
		free, _ := srv.freeBytes()
		if free < 16<<20 {
			break
		}
		if _, err := f.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	big := strings.Repeat("x", 100*1024)
	acked := 0
	var refusal error
	for i := range 1000 {
		_, err := e.db.PutItem(ctx(), &dynamodb.PutItemInput{TableName: aws.String("main"),
			Item: map[string]types.AttributeValue{"pk": s(fmt.Sprint("k", i)), "sk": s("x"), "data": s(big)}})
		if err != nil {
			refusal = err
			break
		}
		acked++
	}
	if refusal == nil || !strings.Contains(refusal.Error(), "InsufficientStorageException") {
		t.Fatalf("after %d writes: %v, want InsufficientStorageException", acked, refusal)
	}
	for i := range acked {
		if getItem(t, e.db, "main", fmt.Sprint("k", i), "x") == nil {
			t.Fatalf("acknowledged item k%d unreadable on a full disk", i)
		}
	}
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.PutItem(ctx(), &dynamodb.PutItemInput{TableName: aws.String("main"), Item: keyOf("after", "x")}); err != nil {
		t.Fatalf("write after space was freed: %v", err)
	}
	t.Logf("%d writes of 100 KB acknowledged, then refused: %v", acked, refusal)
	e = e.reopen()
	if getItem(t, e.db, "main", "after", "x") == nil || getItem(t, e.db, "main", fmt.Sprint("k", acked-1), "x") == nil {
		t.Fatal("data lost across reopen")
	}
}
