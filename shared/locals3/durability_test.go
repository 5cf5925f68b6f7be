package locals3

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/botforge/platform/shared/sdkhttp"
)

const helperDirEnv = "LOCALS3_TEST_HELPER_DIR"

// TestHelperServerProcess is not a test: TestSurvivesKill runs it in a child
// process that serves a Server until it is killed.
func TestHelperServerProcess(t *testing.T) {
	dir := os.Getenv(helperDirEnv)
	if dir == "" {
		t.Skip("helper process for TestSurvivesKill")
	}
	srv, err := Open(Options{Dir: dir, Region: testRegion, AccessKeyID: testAccessKey, SecretAccessKey: testSecret})
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	if err := srv.EnsureBucket(context.Background(), testBucket); err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	fmt.Println("ADDR", ln.Addr().String())
	_ = http.Serve(ln, srv)
}

// An acknowledged PUT survives the server process being killed with SIGKILL
// right after the response.
func TestSurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a process")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperServerProcess$")
	cmd.Env = append(os.Environ(), helperDirEnv+"="+dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})

	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "ADDR ") || strings.HasPrefix(sc.Text(), "ERR ") {
				lines <- sc.Text()
				break
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	var addr string
	select {
	case l := <-lines:
		if !strings.HasPrefix(l, "ADDR ") {
			t.Fatalf("helper: %s", l)
		}
		addr = strings.TrimPrefix(l, "ADDR ")
	case <-time.After(20 * time.Second):
		t.Fatal("helper did not start")
	}

	c := s3.NewFromConfig(aws.Config{
		Region:                     testRegion,
		Credentials:                credentials.NewStaticCredentialsProvider(testAccessKey, testSecret, ""),
		HTTPClient:                 sdkhttp.Client(),
		RetryMaxAttempts:           1,
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenSupported,
	}, func(o *s3.Options) {
		o.BaseEndpoint = aws.String("http://" + addr)
		o.UsePathStyle = true
	})
	body := strings.Repeat("durable ", 1000)
	if _, err := c.PutObject(context.Background(), &s3.PutObjectInput{
		Bucket: aws.String(testBucket), Key: aws.String("acked"), Body: strings.NewReader(body),
	}); err != nil {
		t.Fatalf("PutObject: %v", err)
	}
	// SIGKILL immediately after the acknowledgement.
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	killed = true

	srv, err := Open(Options{Dir: dir, Region: testRegion, AccessKeyID: testAccessKey, SecretAccessKey: testSecret})
	if err != nil {
		t.Fatalf("reopen after kill: %v", err)
	}
	defer srv.Close()
	obj, err := srv.backend.GetObject(testBucket, "acked", nil)
	if err != nil {
		t.Fatalf("acknowledged object lost: %v", err)
	}
	got, _ := io.ReadAll(obj.Contents)
	if string(got) != body {
		t.Fatalf("object corrupted: %d bytes", len(got))
	}
}
