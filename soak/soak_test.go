// Package soak holds the soak test: the exporter serving a churning MMV
// directory and following an archive pmlogger is writing, under concurrent
// scrapes and an OTLP push, for a bounded time. It runs only when
// PCP_EXPORTER_SOAK is set to a duration (`make soak`: 10m, .ci/run: 60s).
package soak

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand"
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

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/pcp-exporter/pcp-exporter/internal/e2e"
	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source/mmv/mmvwrite"
)

const writers = 6

// writer churns one MMV file: its value is always fileID + 1000*k, updated
// every few milliseconds; now and then the file is re-created (a new
// generation), grown (more metrics) or deleted for a while.
func writer(ctx context.Context, t *testing.T, dir string, id int, report func(error)) {
	rng := rand.New(rand.NewSource(int64(id)))
	path := filepath.Join(dir, fmt.Sprintf("soak%d", id))
	k := uint64(0)
	extra := 0
	for ctx.Err() == nil {
		cfg := mmvwrite.Config{Metrics: []mmvwrite.MetricDef{
			{Name: "value", Item: 1, Type: mmvwrite.TypeU64, Sem: semantics.SemCounter, Units: semantics.Units{DimCount: 1}},
		}}
		for i := 0; i < extra; i++ {
			cfg.Metrics = append(cfg.Metrics, mmvwrite.MetricDef{Name: fmt.Sprintf("extra%d", i), Item: uint32(i + 2), Type: mmvwrite.TypeDouble, Sem: semantics.SemInstant})
		}
		w, err := mmvwrite.New(path, cfg)
		if err != nil {
			report(fmt.Errorf("writer %d: %w", id, err))
			return
		}
		h := w.MustHandle("value", "")
		life := time.Duration(500+rng.Intn(2500)) * time.Millisecond
		end := time.Now().Add(life)
		for time.Now().Before(end) && ctx.Err() == nil {
			k++
			h.SetUint64(uint64(id) + 1000*k)
			time.Sleep(time.Duration(1+rng.Intn(5)) * time.Millisecond)
		}
		w.Close()
		switch rng.Intn(3) {
		case 0: // deleted for a while
			os.Remove(path)
			time.Sleep(time.Duration(rng.Intn(500)) * time.Millisecond)
		case 1: // grows
			extra = (extra + 7) % 50
		}
		// otherwise re-created in place: a new generation
	}
	os.Remove(path)
}

type resources struct{ goroutines, fds, rss float64 }

// TestSoak runs for PCP_EXPORTER_SOAK.
func TestSoak(t *testing.T) {
	d := os.Getenv("PCP_EXPORTER_SOAK")
	if d == "" {
		t.Skip("set PCP_EXPORTER_SOAK=60s (.ci/run) or 10m (make soak) to run the soak test")
	}
	dur, err := time.ParseDuration(d)
	if err != nil {
		t.Fatal(err)
	}
	otelcol := e2e.Require(t, "otelcol")[0]
	pmlogger := e2e.Require(t, "pmlogger")[0]
	e2e.LockPMCD(t, false) // records from the system pmcd
	dir := t.TempDir()
	bin := filepath.Join(dir, "pcp-exporter")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/pcp-exporter").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	mmvDir := filepath.Join(dir, "mmv")
	os.Mkdir(mmvDir, 0o755)

	// the OpenTelemetry Collector receiving the push
	grpcAddr := e2e.FreeAddr(t)
	otelOut := filepath.Join(dir, "otel.json")
	cfg := fmt.Sprintf("receivers:\n  otlp:\n    protocols:\n      grpc:\n        endpoint: %s\nexporters:\n  file:\n    path: %s\nservice:\n  telemetry:\n    metrics:\n      level: none\n  pipelines:\n    metrics:\n      receivers: [otlp]\n      exporters: [file]\n", grpcAddr, otelOut)
	os.WriteFile(filepath.Join(dir, "otelcol.yaml"), []byte(cfg), 0o644)
	oc := exec.Command(otelcol, "--config", filepath.Join(dir, "otelcol.yaml"))
	oc.Stdout, oc.Stderr = io.Discard, io.Discard
	if err := oc.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { oc.Process.Kill(); oc.Wait() }()

	// pmlogger writing an archive the second exporter follows
	arch := filepath.Join(dir, "live")
	plCfg := filepath.Join(dir, "pmlogger.config")
	os.WriteFile(plCfg, []byte("log mandatory on 500 msec {\n    kernel.all.load\n    hinv.ncpu\n    mem.util.used\n}\n"), 0o644)
	pl := exec.Command(pmlogger, "-c", plCfg, "-l", filepath.Join(dir, "pmlogger.log"), arch)
	if err := pl.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { pl.Process.Kill(); pl.Wait() }()
	for i := 0; ; i++ {
		if _, err := os.Stat(arch + ".0"); err == nil {
			break
		}
		if i > 100 {
			b, _ := os.ReadFile(filepath.Join(dir, "pmlogger.log"))
			t.Fatalf("pmlogger did not start:\n%s", b)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(2 * time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	errs := make(chan error, 100)
	var lostErrs atomic.Int64
	report := func(err error) { // never blocks: errors beyond the buffer are counted
		select {
		case errs <- err:
		default:
			lostErrs.Add(1)
		}
	}
	var wg sync.WaitGroup
	for i := 1; i <= writers; i++ {
		wg.Add(1)
		go func(i int) { defer wg.Done(); writer(ctx, t, mmvDir, i, report) }(i)
	}

	mmvAddr, archAddr := e2e.FreeAddr(t), e2e.FreeAddr(t)
	logs := map[string]*lockedWriter{}
	start := func(name string, args ...string) *exec.Cmd {
		c := exec.Command(bin, args...)
		logs[name] = &lockedWriter{}
		c.Stdout, c.Stderr = io.Discard, logs[name]
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		return c
	}
	e1 := start("mmv", "serve", "--mmv.dir="+mmvDir, "--web.listen-address="+mmvAddr, "--otlp.endpoint="+grpcAddr, "--otlp.insecure", "--otlp.interval=1s", "--log.level=warn")
	defer func() { e1.Process.Kill(); e1.Wait() }()
	e2 := start("archive", "serve", "--archive="+arch, "--web.listen-address="+archAddr, "--log.level=warn")
	defer func() { e2.Process.Kill(); e2.Wait() }()
	// what the exporters warned about explains a failure
	defer func() {
		if t.Failed() {
			for name, b := range logs {
				t.Logf("%s exporter log (first 4 kB):\n%.4096s", name, b.String())
			}
		}
	}()
	for _, a := range []string{mmvAddr, archAddr} {
		for i := 0; ; i++ {
			if resp, err := http.Get("http://" + a + "/-/healthy"); err == nil {
				resp.Body.Close()
				break
			}
			if i > 100 {
				t.Fatalf("exporter at %s not up", a)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	client := &http.Client{Timeout: 10 * time.Second}
	var scrapes, values, archiveSamples atomic.Int64
	var resMu sync.Mutex
	var samples []resources
	scrape := func(url string, om bool) (map[string]*dto.MetricFamily, error) {
		req, _ := http.NewRequest("GET", url, nil)
		if om {
			req.Header.Set("Accept", "application/openmetrics-text;version=1.0.0")
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			return nil, fmt.Errorf("%s: %s", url, resp.Status)
		}
		if om {
			// the OpenMetrics text differs only in details the text parser
			// rejects (# EOF, _created); check it ends properly
			if !bytes.HasSuffix(body, []byte("# EOF\n")) {
				return nil, fmt.Errorf("%s: OpenMetrics body without # EOF", url)
			}
			return nil, nil
		}
		p := expfmt.NewTextParser(model.LegacyValidation)
		return p.TextToMetricFamilies(bytes.NewReader(body))
	}
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for n := 0; ctx.Err() == nil; n++ {
				url := "http://" + mmvAddr + "/metrics"
				if i%2 == 1 {
					url = "http://" + archAddr + "/metrics"
				}
				mfs, err := scrape(url, n%5 == 4)
				if err != nil {
					if ctx.Err() == nil {
						report(err)
					}
					return
				}
				scrapes.Add(1)
				for name, mf := range mfs {
					if strings.HasPrefix(name, "mmv_soak") && strings.HasSuffix(name, "_value_total") {
						id, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(name, "mmv_soak"), "_value_total"))
						for _, m := range mf.Metric {
							// a new file's value is 0 until its writer sets
							// it (as after libpcp_mmv's mmv_stats_start)
							v := uint64(m.GetCounter().GetValue())
							if float64(v) != m.GetCounter().GetValue() || (v != 0 && v%1000 != uint64(id)) {
								report(fmt.Errorf("%s: impossible value %v (torn or from another file)", name, m.GetCounter().GetValue()))
							}
							values.Add(1)
						}
					}
					if name == "kernel_all_load" {
						archiveSamples.Add(int64(len(mf.Metric)))
					}
					if name == "pcp_exporter_source_up" {
						for _, m := range mf.Metric {
							if m.GetGauge().GetValue() != 1 {
								report(fmt.Errorf("%s: source %q down", url, m.GetLabel()[0].GetValue()))
							}
						}
					}
					if i == 0 && name == "go_goroutines" {
						var r resources
						r.goroutines = mf.Metric[0].GetGauge().GetValue()
						if f := mfs["process_open_fds"]; f != nil {
							r.fds = f.Metric[0].GetGauge().GetValue()
						}
						if f := mfs["process_resident_memory_bytes"]; f != nil {
							r.rss = f.Metric[0].GetGauge().GetValue()
						}
						resMu.Lock()
						samples = append(samples, r)
						resMu.Unlock()
					}
				}
				time.Sleep(20 * time.Millisecond)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	n := 0
	for err := range errs {
		if n++; n <= 10 {
			t.Error(err)
		}
	}
	if n := lostErrs.Load(); n > 0 {
		t.Errorf("%d more errors", n)
	}
	t.Logf("%d scrapes, %d MMV values checked, %d archive samples, %d resource samples", scrapes.Load(), values.Load(), archiveSamples.Load(), len(samples))
	if values.Load() == 0 || archiveSamples.Load() == 0 {
		t.Error("nothing was scraped from one of the exporters")
	}
	// resources: the last third against the first third after warm-up
	if len(samples) >= 9 {
		third := len(samples) / 3
		max := func(s []resources) (r resources) {
			for _, x := range s {
				r.goroutines = maxf(r.goroutines, x.goroutines)
				r.fds = maxf(r.fds, x.fds)
				r.rss = maxf(r.rss, x.rss)
			}
			return
		}
		early, late := max(samples[:third]), max(samples[2*third:])
		t.Logf("early max %+v, late max %+v", early, late)
		if late.goroutines > early.goroutines+20 {
			t.Errorf("goroutines grew from %v to %v", early.goroutines, late.goroutines)
		}
		if late.fds > early.fds+16 {
			t.Errorf("open fds grew from %v to %v", early.fds, late.fds)
		}
		if late.rss > early.rss*1.5+16<<20 {
			t.Errorf("RSS grew from %.0f to %.0f bytes (bound: +50%% + 16 MiB)", early.rss, late.rss)
		}
	} else {
		t.Errorf("only %d resource samples", len(samples))
	}
	// the OTLP push reached the collector without errors
	mfs, err := scrape("http://"+mmvAddr+"/metrics", false)
	if err != nil {
		t.Fatal(err)
	}
	if f := mfs["pcp_exporter_otlp_export_errors_total"]; f == nil || f.Metric[0].GetCounter().GetValue() != 0 {
		t.Errorf("OTLP export errors: %v", f)
	}
	b, _ := os.ReadFile(otelOut)
	if !bytes.Contains(b, []byte(`"mmv.soak`)) {
		t.Errorf("the collector received no MMV metric (%d bytes)", len(b))
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 64<<20)
	lines := 0
	for sc.Scan() {
		lines++
	}
	t.Logf("collector received %d OTLP requests", lines)
}

// lockedWriter keeps the first 64 kB of a child process's log, readable
// while it writes.
type lockedWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if room := 64<<10 - l.b.Len(); room > 0 {
		l.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func maxf(a, b float64) float64 {
	if a > b {
		return a
	}
	return b
}
