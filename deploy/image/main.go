// Command image builds the pcp-exporter container image without a Docker
// daemon: it puts the static binary (built with CGO_ENABLED=0, see
// `make build`), the CA certificates and a passwd entry for nobody on an empty
// base, as one OCI layer, and writes an OCI image layout directory (and, with
// -tarball, a `docker load` tarball). The result is what the Dockerfile at the
// repository root builds: a non-root (65534:65534) image whose entrypoint is
// /pcp-exporter. With -path, -cmd, -title and -port it builds the same kind of
// image for another static binary (the example application examples/mmvapp).
//
// With -check it then reads the image back from the layout, checks its
// configuration, extracts the binary from the image's filesystem and runs it
// with --version, which is how CI proves the image starts.
//
//	go run ./image -binary ../pcp-exporter -out ../bin/image -check
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Image facts of the pcp-exporter image, shared with the Dockerfile and the
// Helm chart.
const (
	binaryPath = "/pcp-exporter"
	user       = "65534:65534"
	port       = "9464/tcp"
)

// Options describe one image build.
type Options struct {
	Binary  string    // static binary to put at Path
	Path    string    // path of the binary in the image, the entrypoint ("" for /pcp-exporter)
	Cmd     []string  // default arguments (nil for ["serve"])
	Title   string    // image title label ("" for pcp-exporter)
	Port    string    // exposed port ("" for 9464/tcp; "-" for none)
	CACerts string    // CA bundle copied to /etc/ssl/certs/ca-certificates.crt ("" for none)
	Version string    // image version label
	Created time.Time // creation time (fixed for reproducible builds)
	Arch    string    // GOARCH of the binary
}

// Build returns the OCI image described by o.
func Build(o Options) (v1.Image, error) {
	bin, err := os.ReadFile(o.Binary)
	if err != nil {
		return nil, fmt.Errorf("image: binary: %w", err)
	}
	if !bytes.HasPrefix(bin, []byte("\x7fELF")) {
		return nil, fmt.Errorf("image: %s is not an ELF executable", o.Binary)
	}
	var certs []byte
	if o.CACerts != "" {
		if certs, err = os.ReadFile(o.CACerts); err != nil {
			return nil, fmt.Errorf("image: CA certificates: %w", err)
		}
	}
	if o.Path == "" {
		o.Path = binaryPath
	}
	if o.Cmd == nil {
		o.Cmd = []string{"serve"}
	}
	if o.Title == "" {
		o.Title = "pcp-exporter"
	}
	ports := map[string]struct{}{port: {}}
	switch o.Port {
	case "":
	case "-":
		ports = nil
	default:
		ports = map[string]struct{}{o.Port: {}}
	}
	layerTar, err := rootfs(o.Path, bin, certs, o.Created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("image: layer: %w", err)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History: v1.History{
			Created:   v1.Time{Time: o.Created},
			CreatedBy: "deploy/image: static binary on an empty base",
		},
	})
	if err != nil {
		return nil, fmt.Errorf("image: append layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image: config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS = "linux"
	cf.Architecture = o.Arch
	cf.Created = v1.Time{Time: o.Created}
	cf.Config = v1.Config{
		User:         user,
		Entrypoint:   []string{o.Path},
		Cmd:          o.Cmd,
		ExposedPorts: ports,
		Env:          []string{"PCP_TMP_DIR=/var/lib/pcp/tmp"},
		WorkingDir:   "/",
		Labels: map[string]string{
			"org.opencontainers.image.title":    o.Title,
			"org.opencontainers.image.source":   "https://github.com/pcp-exporter/pcp-exporter",
			"org.opencontainers.image.version":  o.Version,
			"org.opencontainers.image.licenses": "Apache-2.0",
		},
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("image: set config: %w", err)
	}
	return img, nil
}

// rootfs returns the image's single layer as an uncompressed tar.
func rootfs(path string, bin, certs []byte, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dir := func(name string, mode int64) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode, ModTime: mtime, Format: tar.FormatPAX})
	}
	file := func(name string, mode int64, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: mtime, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	steps := []func() error{
		func() error { return file(strings.TrimPrefix(path, "/"), 0o755, bin) },
		func() error { return dir("etc/", 0o755) },
		func() error {
			return file("etc/passwd", 0o644, []byte("root:x:0:0:root:/:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n"))
		},
		func() error { return file("etc/group", 0o644, []byte("root:x:0:\nnogroup:x:65534:\n")) },
		func() error { return dir("tmp/", 0o1777) },
		func() error { return dir("var/", 0o755) },
		func() error { return dir("var/lib/", 0o755) },
		func() error { return dir("var/lib/pcp/", 0o755) },
		func() error { return dir("var/lib/pcp/tmp/", 0o755) },
		func() error { return dir("var/lib/pcp/tmp/mmv/", 0o1777) }, // writable by the example application without a volume
	}
	if certs != nil {
		steps = append(steps,
			func() error { return dir("etc/ssl/", 0o755) },
			func() error { return dir("etc/ssl/certs/", 0o755) },
			func() error { return file("etc/ssl/certs/ca-certificates.crt", 0o644, certs) },
		)
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return nil, fmt.Errorf("image: layer tar: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("image: layer tar: %w", err)
	}
	return buf.Bytes(), nil
}

// WriteLayout writes img as the only image of a fresh OCI layout at dir,
// annotated with ref as its org.opencontainers.image.ref.name.
func WriteLayout(dir string, img v1.Image, ref string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("image: layout %s: %w", dir, err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref})); err != nil {
		return fmt.Errorf("image: layout %s: %w", dir, err)
	}
	return nil
}

// Check reads the image at the OCI layout dir, verifies its configuration
// (non-root numeric user, a single-binary entrypoint), extracts the
// entrypoint's binary from the image's filesystem into tmp, runs it with
// args in an empty environment, and returns the output, which must start
// with want.
func Check(dir, tmp string, args []string, want string) (string, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return "", fmt.Errorf("image: check: %w", err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		return "", fmt.Errorf("image: check: %w", err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return "", fmt.Errorf("image: check: %w", err)
	}
	if len(im.Manifests) != 1 {
		return "", fmt.Errorf("image: check: %s holds %d manifests, want 1", dir, len(im.Manifests))
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		return "", fmt.Errorf("image: check: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return "", fmt.Errorf("image: check: %w", err)
	}
	if err := checkConfig(cf); err != nil {
		return "", err
	}
	entry := cf.Config.Entrypoint[0]
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	out := filepath.Join(tmp, filepath.Base(entry)+"-from-image")
	found := false
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("image: check: read filesystem: %w", err)
		}
		if filepath.Clean("/"+h.Name) != entry {
			continue
		}
		if h.Mode&0o111 == 0 {
			return "", fmt.Errorf("image: check: %s is not executable (mode %o)", entry, h.Mode)
		}
		f, err := os.OpenFile(out, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
		if err != nil {
			return "", err
		}
		if _, err := io.Copy(f, tr); err != nil {
			f.Close()
			return "", fmt.Errorf("image: check: extract: %w", err)
		}
		if err := f.Close(); err != nil {
			return "", err
		}
		found = true
	}
	if !found {
		return "", fmt.Errorf("image: check: %s not in the image", entry)
	}
	cmd := exec.Command(out, args...)
	cmd.Env = []string{} // as in an empty container: no PATH, no HOME
	b, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("image: check: %s %s: %w: %s", entry, strings.Join(args, " "), err, b)
	}
	if !strings.HasPrefix(string(b), want) {
		return "", fmt.Errorf("image: check: %s %s printed %q, want it to start with %q", entry, strings.Join(args, " "), b, want)
	}
	return string(b), nil
}

func checkConfig(cf *v1.ConfigFile) error {
	c := cf.Config
	uid, _, _ := strings.Cut(c.User, ":")
	if n, err := strconv.Atoi(uid); err != nil || n == 0 {
		return fmt.Errorf("image: check: user %q is not a numeric non-root uid", c.User)
	}
	if len(c.Entrypoint) != 1 || !strings.HasPrefix(c.Entrypoint[0], "/") {
		return fmt.Errorf("image: check: entrypoint %q, want one absolute path", c.Entrypoint)
	}
	if cf.OS != "linux" {
		return fmt.Errorf("image: check: os %q, want linux", cf.OS)
	}
	return nil
}

func main() {
	var (
		binary    = flag.String("binary", "pcp-exporter", "static binary (CGO_ENABLED=0)")
		path      = flag.String("path", binaryPath, "path of the binary in the image (the entrypoint)")
		cmdArgs   = flag.String("cmd", "serve", "default arguments, comma-separated (\"\" for none)")
		title     = flag.String("title", "pcp-exporter", "image title label")
		exposed   = flag.String("port", port, "exposed port (\"-\" for none)")
		out       = flag.String("out", "bin/image", "OCI image layout directory to write")
		tarFile   = flag.String("tarball", "", "also write a `docker load` tarball here")
		ref       = flag.String("ref", "ghcr.io/pcp-exporter/pcp-exporter:dev", "image reference (tag) to record")
		version   = flag.String("version", "dev", "value of the org.opencontainers.image.version label")
		certs     = flag.String("ca-certificates", "/etc/ssl/certs/ca-certificates.crt", "CA bundle to include (\"\" for none)")
		arch      = flag.String("arch", runtime.GOARCH, "GOARCH of the binary")
		check     = flag.Bool("check", false, "read the image back, extract the binary and run it with -check.args")
		checkArgs = flag.String("check.args", "--version", "arguments of the check run, comma-separated")
		checkWant = flag.String("check.want", "pcp-exporter, version ", "the check run's output must start with this")
	)
	flag.Parse()
	o := Options{Binary: *binary, Path: *path, Cmd: split(*cmdArgs), Title: *title, Port: *exposed, CACerts: *certs, Version: *version, Arch: *arch}
	if err := run(o, *out, *tarFile, *ref, *check, split(*checkArgs), *checkWant); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func split(s string) []string {
	if s == "" {
		return []string{}
	}
	return strings.Split(s, ",")
}

func run(o Options, out, tarFile, ref string, check bool, checkArgs []string, checkWant string) error {
	o.Created = time.Unix(0, 0).UTC()
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("image: SOURCE_DATE_EPOCH: %w", err)
		}
		o.Created = time.Unix(n, 0).UTC()
	}
	if o.CACerts != "" {
		if _, err := os.Stat(o.CACerts); err != nil {
			return fmt.Errorf("image: CA certificates: %w (install ca-certificates or pass -ca-certificates=\"\")", err)
		}
	}
	img, err := Build(o)
	if err != nil {
		return err
	}
	if err := WriteLayout(out, img, ref); err != nil {
		return err
	}
	d, _ := img.Digest()
	fmt.Printf("image: wrote OCI layout %s (%s, digest %s)\n", out, ref, d)
	if tarFile != "" {
		tag, err := name.NewTag(ref)
		if err != nil {
			return fmt.Errorf("image: ref: %w", err)
		}
		if err := tarball.WriteToFile(tarFile, tag, img); err != nil {
			return fmt.Errorf("image: tarball: %w", err)
		}
		fmt.Printf("image: wrote %s (docker load -i %s)\n", tarFile, tarFile)
	}
	if check {
		tmp, err := os.MkdirTemp("", "image-check")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		v, err := Check(out, tmp, checkArgs, checkWant)
		if err != nil {
			return err
		}
		fmt.Printf("image: check ok: the binary extracted from the image answers %s:\n%s", strings.Join(checkArgs, " "), v)
	}
	return nil
}
