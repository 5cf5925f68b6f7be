package localdynamo

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// crashChildEnv switches the test binary into the child role of TestKill9.
const crashChildEnv = "LOCALDYNAMO_CRASH_CHILD_DIR"

const crashWorkers = 8

// TestKill9Child is the process TestKill9 kills. It serves the directory in
// $LOCALDYNAMO_CRASH_CHILD_DIR on a loopback port and writes to it from
// several goroutines until it is killed, printing "ack <key>" after each
// acknowledged PutItem and "inc" after each acknowledged counter increment.
func TestKill9Child(t *testing.T) {
	dir := os.Getenv(crashChildEnv)
	if dir == "" {
		t.Skip("helper process of TestKill9")
	}
	fail := func(err error) {
		fmt.Println("error", err)
		os.Exit(2)
	}
	srv, err := Open(dir)
	if err != nil {
		fail(err)
	}
	hs := httptest.NewServer(srv)
	db := clientFor(srv, hs.URL)
	createTable(t, db, "main")
	if _, err := db.PutItem(ctx(), &dynamodb.PutItemInput{TableName: aws.String("main"),
		Item: map[string]types.AttributeValue{"pk": s("counter"), "sk": s("c"), "n": n(0)}}); err != nil {
		fail(err)
	}
	fmt.Println("ready")

	var (
		out  sync.Mutex
		next atomic.Int64
	)
	for range crashWorkers {
		go func() {
			for {
				key := fmt.Sprintf("k%07d", next.Add(1))
				if _, err := db.PutItem(ctx(), &dynamodb.PutItemInput{TableName: aws.String("main"),
					Item: map[string]types.AttributeValue{"pk": s(key), "sk": s("x"), "gpk": s("g"), "gsk": s(key)}}); err != nil {
					fail(err)
				}
				out.Lock()
				fmt.Println("ack", key)
				out.Unlock()
				if _, err := db.UpdateItem(ctx(), &dynamodb.UpdateItemInput{
					TableName: aws.String("main"), Key: keyOf("counter", "c"),
					UpdateExpression:          aws.String("ADD n :one"),
					ExpressionAttributeValues: map[string]types.AttributeValue{":one": n(1)},
				}); err != nil {
					fail(err)
				}
				out.Lock()
				fmt.Println("inc")
				out.Unlock()
			}
		}()
	}
	// TestKill9 kills us long before this; it only bounds an orphan's life.
	time.Sleep(time.Minute)
	os.Exit(3)
}

// Test 2: every write acknowledged before a SIGKILL is there after reopen.
func TestKill9(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("needs SIGKILL and flock semantics")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKill9Child$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	watchdog := time.AfterFunc(30*time.Second, func() { _ = cmd.Process.Kill() })
	defer watchdog.Stop()

	const killAfter = 400 // acknowledged puts
	acked := map[string]bool{}
	incs, killed := 0, false
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "ack "):
			acked[strings.TrimPrefix(line, "ack ")] = true
		case line == "inc":
			incs++
		case line == "ready":
			// The child holds the directory: this process cannot open it.
			if srv, err := Open(dir); !errors.Is(err, ErrLocked) {
				if srv != nil {
					srv.Close()
				}
				t.Errorf("Open of a directory another process serves: got %v, want ErrLocked", err)
			}
		case strings.HasPrefix(line, "error"):
			t.Errorf("child: %s", line)
		}
		if !killed && len(acked) >= killAfter {
			// Lines already in the pipe are still read: they were printed,
			// so acknowledged, before the kill.
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			killed = true
		}
	}
	err = cmd.Wait()
	if !killed {
		t.Fatalf("child ended before it was killed (%v); stderr:\n%s", err, stderr.String())
	}

	start := time.Now()
	e := openEnv(t, dir)
	t.Logf("killed after %d acknowledged puts and %d increments; reopened in %v",
		len(acked), incs, time.Since(start))

	items := scanAll(t, e.db, "main")
	if len(items) < len(acked)+1 {
		t.Fatalf("%d items after kill -9, want at least %d", len(items), len(acked)+1)
	}
	for key := range acked {
		if getItem(t, e.db, "main", key, "x") == nil {
			t.Fatalf("acknowledged item %s lost by kill -9", key)
		}
	}
	counter, _ := strconv.Atoi(getItem(t, e.db, "main", "counter", "c")["n"].(*types.AttributeValueMemberN).Value)
	// Increments in flight at the kill may or may not have been made durable.
	if counter < incs || counter > incs+crashWorkers {
		t.Fatalf("counter = %d after kill -9, want %d acknowledged increments (+ at most %d in flight)", counter, incs, crashWorkers)
	}
	if got := len(queryGSI(t, e.db, "main", "g")); got != len(items)-1 {
		t.Fatalf("GSI has %d items, table %d", got, len(items)-1)
	}
}
