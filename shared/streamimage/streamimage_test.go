package streamimage_test

import (
	"archive/tar"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/botforge/platform/shared/streamimage"
)

// TestImageRunsTheService: the tarball written from the service's binary
// (built for this machine's architecture, as `make stream-image` builds it
// for arm64) reads back as an OCI image whose entrypoint is the binary;
// the binary taken out of its layer starts and answers the load
// balancer's health check.
func TestImageRunsTheService(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the image is linux/*")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "github.com/botforge/platform/functions/chatstream-service")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	binary, _ := os.ReadFile(bin)
	certs, err := streamimage.SystemCACerts()
	if err != nil {
		t.Skip(err)
	}
	img, err := streamimage.Image(binary, certs, runtime.GOARCH)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "image.tar")
	if err := streamimage.Write(path, "bot-platform/chatstream-service:test", img); err != nil {
		t.Fatal(err)
	}

	tag, _ := name.NewTag("bot-platform/chatstream-service:test")
	got, err := tarball.ImageFromPath(path, &tag)
	if err != nil {
		t.Fatal(err)
	}
	// The tarball's manifest.json carries no media types: the image's own.
	if mt, _ := img.MediaType(); mt != types.OCIManifestSchema1 {
		t.Errorf("manifest media type %s, want OCI", mt)
	}
	cf, err := got.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cf.Config.Entrypoint, []string{streamimage.Binary}) || cf.OS != "linux" || cf.Architecture != runtime.GOARCH ||
		!slices.Contains(cf.Config.Env, "PORT=8080") || cf.Config.User != streamimage.User {
		t.Fatalf("config: entrypoint %v, %s/%s, env %v, user %q", cf.Config.Entrypoint, cf.OS, cf.Architecture, cf.Config.Env, cf.Config.User)
	}
	layers, err := got.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %d %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string]int64{}
	extracted := filepath.Join(dir, "from-image")
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files["/"+h.Name] = h.Mode
		if "/"+h.Name == streamimage.Binary {
			f, _ := os.OpenFile(extracted, os.O_CREATE|os.O_WRONLY, 0o755)
			_, _ = io.Copy(f, tr)
			f.Close()
		}
	}
	if files[streamimage.Binary] != 0o755 || files[streamimage.CACerts] == 0 {
		t.Fatalf("layer files %v: want the binary (0755) and the CA bundle", files)
	}

	// The binary from the image serves (no DynamoDB here: the health check
	// does not need it).
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	_, port, _ := net.SplitHostPort(l.Addr().String())
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, extracted)
	cmd.Env = []string{"PORT=" + port, "PLATFORM_PAGING_KEY=" + "00112233445566778899aabbccddeeff", "AWS_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=AKIDTEST", "AWS_SECRET_ACCESS_KEY=test", "DYNAMODB_ENDPOINT=http://127.0.0.1:1", "HOME=" + dir}
	cmd.Cancel = func() error { return cmd.Process.Kill() }
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer cancel()
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := http.Get("http://127.0.0.1:" + port + "/healthz")
		if err == nil {
			var st struct{ Streams int }
			err = json.NewDecoder(res.Body).Decode(&st)
			res.Body.Close()
			if res.StatusCode != 200 || err != nil {
				t.Fatalf("health: %d %v", res.StatusCode, err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the image's binary did not answer within 30 s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// SIGTERM (ECS stopping the task): it stops serving and exits 0.
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("after SIGTERM: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("still running 20 s after SIGTERM")
	}
}
