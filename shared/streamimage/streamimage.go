// Package streamimage builds the container stream tier's image
// (docs/deploy.md "Stream tiers") from the Go binary of
// functions/chatstream-service, without a Docker daemon: one layer holding
// the binary and the build machine's CA certificates (the service calls
// AWS over TLS), written as an OCI image tarball that `docker load`,
// `crane push` and `skopeo copy docker-archive:` take.
package streamimage

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Where things are in the image.
const (
	Binary  = "/chatstream-service"
	CACerts = "/etc/ssl/certs/ca-certificates.crt"
	Port    = "8080"
	// User is an unprivileged user (the service binds 8080, not a
	// privileged port).
	User = "65532:65532"
)

// CACertFiles are where Linux distributions keep their CA bundle.
var CACertFiles = []string{"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem"}

// Image is the image of binary (built for arch: arm64 on Fargate's
// Graviton tasks) with the CA bundle caCerts.
func Image(binary, caCerts []byte, arch string) (v1.Image, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	// A fixed time: the same binary gives the same image digest.
	epoch := time.Unix(0, 0)
	for _, d := range []string{"etc/", "etc/ssl/", "etc/ssl/certs/", "tmp/"} {
		mode := int64(0o755)
		if d == "tmp/" {
			mode = 0o1777
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: mode, ModTime: epoch}); err != nil {
			return nil, err
		}
	}
	for _, f := range []struct {
		name string
		mode int64
		data []byte
	}{{Binary[1:], 0o755, binary}, {CACerts[1:], 0o644, caCerts}} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: epoch}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layerBytes := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layerBytes)), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.AppendLayers(img, layer)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", arch
	cf.Created = v1.Time{Time: epoch}
	cf.Config.Entrypoint = []string{Binary}
	cf.Config.Env = []string{"PORT=" + Port, "SSL_CERT_FILE=" + CACerts}
	cf.Config.ExposedPorts = map[string]struct{}{Port + "/tcp": {}}
	cf.Config.User = User
	cf.Config.WorkingDir = "/"
	return mutate.ConfigFile(img, cf)
}

// Write writes img as an image tarball tagged ref.
func Write(path, ref string, img v1.Image) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("image name %q: %w", ref, err)
	}
	return tarball.WriteToFile(path, tag, img)
}

// SystemCACerts reads the build machine's CA bundle.
func SystemCACerts() ([]byte, error) {
	for _, p := range CACertFiles {
		if b, err := os.ReadFile(p); err == nil && len(b) > 0 {
			return b, nil
		}
	}
	return nil, fmt.Errorf("no CA bundle at %v (install ca-certificates)", CACertFiles)
}
