package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// FreeAddr returns a free loopback address (host:port).
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// StartPrometheus runs the real Prometheus with the given configuration
// file content on a free loopback port, its TSDB in dataDir (a temporary
// directory when empty), plus extra flags; it returns the base URL once
// Prometheus is ready, and stops it when the test ends.
func StartPrometheus(t testing.TB, config, dataDir string, flags ...string) string {
	t.Helper()
	bin := Require(t, "prometheus")[0]
	dir := t.TempDir()
	if dataDir == "" {
		dataDir = filepath.Join(dir, "data")
	}
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := FreeAddr(t)
	args := append([]string{"--config.file=" + cfg, "--storage.tsdb.path=" + dataDir, "--web.listen-address=" + addr, "--storage.tsdb.retention.time=100y"}, flags...)
	cmd := exec.Command(bin, args...)
	logf, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		logf.Close()
	})
	base := "http://" + addr
	if !Answers(base+"/-/ready", 60*time.Second) {
		b, _ := os.ReadFile(filepath.Join(dir, "prometheus.log"))
		t.Fatalf("prometheus not ready:\n%s", b)
	}
	return base
}

// Answers waits up to timeout for u to answer 200 and says whether it did.
func Answers(u string, timeout time.Duration) bool {
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if resp, err := http.Get(u); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return true
			}
		}
	}
	return false
}

// PromSeries is one series of a Prometheus query result: its labels and
// its samples ([time in seconds, value as text]).
type PromSeries struct {
	Metric map[string]string
	Value  [2]any   // instant vector
	Values [][2]any // range vector (matrix)
}

// PromQuery runs an instant query at time at (zero: now) against a
// Prometheus-compatible API and returns the result series.
func PromQuery(t testing.TB, base, query string, at time.Time) []PromSeries {
	t.Helper()
	v := url.Values{"query": {query}}
	if !at.IsZero() {
		v.Set("time", fmt.Sprintf("%d.%03d", at.Unix(), at.Nanosecond()/1e6))
	}
	var data struct{ Result []PromSeries }
	PromAPI(t, base+"/api/v1/query?"+v.Encode(), &data)
	return data.Result
}

// PromAPI gets u, a Prometheus HTTP API URL, and decodes the answer's data
// into data; an error or a status other than success fails t.
func PromAPI(t testing.TB, u string, data any) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var r struct {
		Status string
		Data   json.RawMessage
	}
	if err := json.Unmarshal(body, &r); err != nil || r.Status != "success" {
		t.Fatalf("%s: %v %s", u, err, body)
	}
	if err := json.Unmarshal(r.Data, data); err != nil {
		t.Fatalf("%s: %v", u, err)
	}
}
