// Command stream-image builds the container stream tier's image
// (docs/deploy.md "Stream tiers") without a Docker daemon: it builds
// functions/chatstream-service for linux/<-arch> and writes an OCI image
// tarball (shared/streamimage) to push to the registry the stack's
// StreamImage parameter names, e.g. with `crane push` or `skopeo copy`.
//
//	go run ./scripts/stream-image -o .build/stream-image.tar
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/botforge/platform/shared/streamimage"
)

func main() {
	out := flag.String("o", ".build/stream-image.tar", "the image tarball to write")
	arch := flag.String("arch", "arm64", "the tasks' architecture (template.yaml's task definition: ARM64)")
	ref := flag.String("tag", "bot-platform/chatstream-service:latest", "the image's name in the tarball")
	flag.Parse()
	if err := run(*out, *arch, *ref); err != nil {
		fmt.Fprintln(os.Stderr, "stream-image:", err)
		os.Exit(1)
	}
}

func run(out, arch, ref string) error {
	dir, err := os.MkdirTemp("", "stream-image")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "chatstream-service")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, "./functions/chatstream-service")
	build.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+arch, "CGO_ENABLED=0")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("go build: %w", err)
	}
	binary, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	certs, err := streamimage.SystemCACerts()
	if err != nil {
		return err
	}
	img, err := streamimage.Image(binary, certs, arch)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	if err := streamimage.Write(out, ref, img); err != nil {
		return err
	}
	d, _ := img.Digest()
	fmt.Printf("%s: %s (linux/%s), %d MiB binary, image %s\n", out, ref, arch, len(binary)>>20, d)
	return nil
}
