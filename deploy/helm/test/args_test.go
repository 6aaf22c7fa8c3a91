package test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// The tests in this file run the real pcp-exporter binary with the args the
// chart renders (paths moved into a temporary directory, $(VAR) references
// expanded as the kubelet expands them), so a flag the chart passes that the
// binary does not accept fails here rather than in a cluster.

var (
	binOnce sync.Once
	binPath string
	binErr  error
	binDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// exporterBinary builds cmd/pcp-exporter of this repository once, or returns
// $PCP_EXPORTER_BINARY when set (a binary built elsewhere, e.g. by .ci/run).
func exporterBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("PCP_EXPORTER_BINARY"); p != "" {
		return p
	}
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "pcp-exporter-chart-test")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "pcp-exporter")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/pcp-exporter")
		cmd.Dir = "../../.."
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build ./cmd/pcp-exporter: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// requireCommand fails the test when the binary lacks a subcommand the chart runs.
func requireCommand(t *testing.T, bin, command string) {
	t.Helper()
	if err := exec.Command(bin, "help", command).Run(); err != nil {
		t.Fatalf("pcp-exporter has no %q command, which the chart runs: %v", command, err)
	}
}

// expandEnv expands $(NAME) as the kubelet does for container args.
func expandEnv(arg string, env map[string]string) string {
	for k, v := range env {
		arg = strings.ReplaceAll(arg, "$("+k+")", v)
	}
	return arg
}

// TestAtFileExpansion: the backfill Job hands each completion its archives as
// "@FILE" (one argument per line); pcp-exporter's parser must expand it.
func TestAtFileExpansion(t *testing.T) {
	bin := exporterBinary(t)
	archive, err := filepath.Abs("../../../testdata/pcp-corpus/archives/seedtables/seedtables")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "shard-0")
	if err := os.WriteFile(file, []byte(archive+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	direct, err := exec.Command(bin, "info", archive).Output()
	if err != nil {
		t.Fatalf("info %s: %v", archive, err)
	}
	viaFile, err := exec.Command(bin, "info", "@"+file).Output()
	if err != nil {
		t.Fatalf("info @%s: %v", file, err)
	}
	if string(direct) != string(viaFile) || len(direct) == 0 {
		t.Errorf("info @FILE differs from info ARCHIVE")
	}
}

// TestSidecarArgsRun runs `pcp-exporter` with the sidecar's rendered args
// (derived-metrics and mapping files from the rendered ConfigMap) and checks
// the endpoints the probes and monitors use.
func TestSidecarArgsRun(t *testing.T) {
	bin := exporterBinary(t)
	requireCommand(t, bin, "serve")
	m := renderValues(t, filepath.Join(chartDir, "ci", "sidecar-values.yaml"))
	c := exporter(t, "example", m.deployments[0].Spec.Template.Spec)
	tmp := t.TempDir()
	mmvDir := filepath.Join(tmp, "mmv")
	confDir := filepath.Join(tmp, "etc")
	for _, d := range []string{mmvDir, confDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, cm := range m.configMaps {
		for k, v := range cm.Data {
			if err := os.WriteFile(filepath.Join(confDir, k), []byte(v), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	serveRendered(t, bin, c, func(a string) string {
		a = strings.ReplaceAll(a, "/etc/pcp-exporter/", confDir+"/")
		if strings.HasPrefix(a, "--mmv.dir=") {
			a = "--mmv.dir=" + mmvDir
		}
		return a
	}, nil, c.LivenessProbe.HTTPGet.Path, c.ReadinessProbe.HTTPGet.Path, "/metrics")
}

// serveRendered runs `pcp-exporter` with a container's rendered args (each
// passed through rewrite, the listen address replaced by a free one) and
// waits until every path answers 200 and the last one's body holds every
// string of until (a source comes up after the first answer; 30 s at most);
// it returns the body of the last.
func serveRendered(t *testing.T, bin string, c corev1.Container, rewrite func(string) string, until []string, paths ...string) string {
	t.Helper()
	addr := freeAddr(t)
	var args []string
	for _, a := range c.Args {
		a = rewrite(a)
		if strings.HasPrefix(a, "--web.listen-address=") {
			a = "--web.listen-address=" + addr
		}
		args = append(args, a)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = envOf(c.Env)
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
		}
	}()
	var body []byte
	for _, p := range paths {
		for {
			select {
			case err := <-exited:
				t.Fatalf("pcp-exporter %q exited: %v\n%s", args, err, out.String())
			default:
			}
			resp, err := http.Get("http://" + addr + p)
			if err == nil {
				body, _ = io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK && (p != paths[len(paths)-1] || holdsAll(string(body), until)) {
					break
				}
			}
			if ctx.Err() != nil {
				if err == nil && resp.StatusCode == http.StatusOK {
					return string(body) // the caller says what it lacks
				}
				t.Fatalf("GET %s: no 200 within 30 s (last: %v)\n%s", p, err, out.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return string(body)
}

// holdsAll says whether s holds every string of subs.
func holdsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// TestDaemonSetPMCDArgsRun runs `pcp-exporter` with the args of the
// DaemonSet that mounts the node's pmcd socket, against this host's pmcd
// (its socket directory in place of the mount): pmcd is served, up.
func TestDaemonSetPMCDArgsRun(t *testing.T) {
	bin := exporterBinary(t)
	m := renderValues(t, filepath.Join(chartDir, "ci", "daemonset-pmcd-values.yaml"))
	if len(m.daemonSets) != 1 {
		t.Fatalf("%d DaemonSets", len(m.daemonSets))
	}
	c := exporter(t, "daemonset", m.daemonSets[0].Spec.Template.Spec)
	sock := "/run/pcp/pmcd.socket"
	if _, err := os.Stat(sock); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no pmcd socket: %v", err)
		}
		t.Skipf("no pmcd socket here (CI=true makes this a failure): %v", err)
	}
	mmvDir := t.TempDir()
	wants := []string{`pcp_exporter_source_up{reason="",source="pmcd unix:/run/pcp/pmcd.socket"} 1`, "\nkernel_all_load{"}
	body := serveRendered(t, bin, c, func(a string) string {
		if strings.HasPrefix(a, "--mmv.dir=") {
			a = "--mmv.dir=" + mmvDir
		}
		return a
	}, wants, "/metrics")
	for _, want := range wants {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(body, "\nhotproc_") || strings.Contains(body, "\nmmv_control_") {
		t.Error("/metrics has metrics --pmcd.metrics or the MMV directory exclude")
	}
}

// TestBackfillArgsRun runs every shard of the rendered backfill Job over
// corpus archives, with the shard file and $(SHARD_INDEX) as the kubelet
// would provide them, against a local remote-write receiver.
func TestBackfillArgsRun(t *testing.T) {
	bin := exporterBinary(t)
	requireCommand(t, bin, "backfill")
	var posts atomic.Int64
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.Method == http.MethodPost && r.URL.Path == "/api/v1/write" {
			posts.Add(1)
		}
		w.WriteHeader(http.StatusNoContent)
	})}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	defer srv.Close()

	corpus, err := filepath.Abs("../../../testdata/pcp-corpus/archives")
	if err != nil {
		t.Fatal(err)
	}
	m := renderValues(t, filepath.Join(chartDir, "ci", "backfill-values.yaml"),
		"backfill.output=remote-write:http://"+l.Addr().String()+"/api/v1/write",
		"backfill.archivesMountPath="+corpus,
		"backfill.archives={seedtables/seedtables,types/types,indoms/indoms}",
		"backfill.shards=2",
		"backfill.cronJob.enabled=false")
	spec := m.jobs[0].Spec.Template.Spec
	c := exporter(t, "job", spec)
	var shards *corev1.ConfigMap
	for i := range m.configMaps {
		if strings.HasSuffix(m.configMaps[i].Name, "-shards") {
			shards = &m.configMaps[i]
		}
	}
	if shards == nil {
		t.Fatal("no shards ConfigMap")
	}
	mountDir := t.TempDir() // the ConfigMap volume
	for k, v := range shards.Data {
		if err := os.WriteFile(filepath.Join(mountDir, k), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i := range int(*m.jobs[0].Spec.Completions) {
		env := map[string]string{"SHARD_INDEX": strconv.Itoa(i)}
		var args []string
		for _, a := range c.Args {
			a = expandEnv(a, env)
			a = strings.ReplaceAll(a, "@/etc/pcp-exporter-shards/", "@"+mountDir+"/")
			args = append(args, a)
		}
		before := posts.Load()
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("shard %d: pcp-exporter %q: %v\n%s", i, args, err, out)
		}
		if posts.Load() == before {
			t.Errorf("shard %d: no remote-write request received\n%s", i, out)
		}
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func envOf(vars []corev1.EnvVar) []string {
	env := os.Environ()
	for _, v := range vars {
		if v.ValueFrom == nil {
			env = append(env, v.Name+"="+v.Value)
		}
	}
	return env
}

type lockedBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b = append(l.b, p...)
	return len(p), nil
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.b)
}
