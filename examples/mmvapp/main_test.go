package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/examples/mmvapp/shop"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// build compiles a package of this module into dir and returns the binary.
func build(t *testing.T, dir, pkg, name string) string {
	t.Helper()
	out := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-o", out, pkg)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	return out
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// start runs a process until the test ends, with its output in the test log
// on failure.
func start(t *testing.T, name string, args ...string) *exec.Cmd {
	t.Helper()
	var out bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("%s output:\n%s", filepath.Base(name), out.String())
		}
	})
	return cmd
}

func scrape(ctx context.Context, url string) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s: %s", url, resp.Status, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(bytes.NewReader(body))
}

// value returns the value of the sample of family name whose labels include
// want, and whether there is one.
func value(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	f, ok := fams[name]
	if !ok {
		return 0, false
	}
	for _, m := range f.Metric {
		labels := map[string]string{}
		for _, l := range m.Label {
			labels[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range want {
			if labels[k] != v {
				match = false
			}
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Untyped != nil:
			return m.Untyped.GetValue(), true
		}
	}
	return 0, false
}

// TestSidecar runs the example application and pcp-exporter as two processes
// sharing one MMV directory, as the pod's containers share an emptyDir, and
// checks that a scrape of /metrics shows the application's metrics with PCP
// units converted to base units (milliseconds to seconds, Kbyte to bytes,
// counters with _total, the string as an info metric). Then the application
// stops and its metrics disappear (the MMV PID check).
func TestSidecar(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs two programs")
	}
	tmp := t.TempDir()
	exporter := build(t, tmp, "github.com/pcp-exporter/pcp-exporter/cmd/pcp-exporter", "pcp-exporter")
	if err := exec.Command(exporter, "serve", "--help").Run(); err != nil {
		t.Skipf("this build of pcp-exporter has no serve command yet: %v", err)
	}
	app := build(t, tmp, ".", "mmvapp")

	const ticks = 4
	dir := filepath.Join(tmp, "pcp", "tmp", "mmv") // the shared emptyDir
	appCmd := start(t, app, "-mmv.dir", dir, "-interval", "20ms", "-ticks", fmt.Sprint(ticks))
	addr := freePort(t)
	start(t, exporter, "serve", "--mmv.dir="+dir, "--web.listen-address="+addr, "--log.level=debug")

	// Expected values: the application's simulation (endpoint i serves i+1
	// requests per tick, 12.5 ms and 2 Kbyte each) converted to base units.
	type sample struct {
		name   string
		labels map[string]string
		value  float64
	}
	var want []sample
	for i, e := range shop.Endpoints {
		n := float64(ticks * (i + 1))
		inst := map[string]string{"instname": e}
		want = append(want,
			sample{"mmv_mmvapp_requests_total", inst, n},
			sample{"mmv_mmvapp_request_time_seconds_total", inst, n * shop.RequestMillis / 1000},
			sample{"mmv_mmvapp_sent_bytes_total", inst, n * shop.RequestKbytes * 1024},
		)
	}
	want = append(want,
		sample{"mmv_mmvapp_in_flight", nil, 0},
		sample{"mmv_mmvapp_version_info", map[string]string{"value": shop.Version}, 1},
	)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url := "http://" + addr + "/metrics"
	var fams map[string]*dto.MetricFamily
	var lastErr error
	for ctx.Err() == nil {
		fams, lastErr = scrape(ctx, url)
		if lastErr == nil {
			if v, ok := value(fams, "mmv_mmvapp_requests_total", map[string]string{"instname": "/"}); ok && v == ticks {
				break
			}
			lastErr = fmt.Errorf("final values not scraped yet")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if ctx.Err() != nil {
		t.Fatalf("no scrape with the application's final values within 30 s: %v", lastErr)
	}
	for _, s := range want {
		v, ok := value(fams, s.name, s.labels)
		if !ok {
			t.Errorf("%s%v missing; families: %s", s.name, s.labels, names(fams))
			continue
		}
		if math.Abs(v-s.value) > 1e-9*math.Max(1, math.Abs(s.value)) {
			t.Errorf("%s%v = %g, want %g", s.name, s.labels, v, s.value)
		}
	}
	for _, c := range []string{"mmv_mmvapp_requests_total", "mmv_mmvapp_request_time_seconds_total", "mmv_mmvapp_sent_bytes_total"} {
		if f := fams[c]; f != nil && f.GetType() != dto.MetricType_COUNTER {
			t.Errorf("%s has type %v, want counter", c, f.GetType())
		}
	}

	// The application crashes: its file stays, but its PID is gone, so the
	// exporter stops serving its metrics (the PROCESS flag, as pmdammv does).
	appCmd.Process.Kill()
	appCmd.Wait()
	if _, err := os.Stat(filepath.Join(dir, "mmvapp")); err != nil {
		t.Fatalf("the crashed application's MMV file should stay: %v", err)
	}
	for ctx.Err() == nil {
		fams, lastErr = scrape(ctx, url)
		if lastErr == nil {
			if _, ok := fams["mmv_mmvapp_requests_total"]; !ok {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Errorf("the stopped application's metrics are still served: %v", lastErr)
}

func names(fams map[string]*dto.MetricFamily) string {
	var s []string
	for n := range fams {
		if strings.HasPrefix(n, "mmv_") {
			s = append(s, n)
		}
	}
	return strings.Join(s, " ")
}
