// Command mmvapp is a small application instrumented with PCP's Memory Mapped
// Values (MMV) through mmv.Writer, the pure-Go writer in source/mmv (files
// byte-compatible with libpcp_mmv). It is the application half of the sidecar
// example: it writes $PCP_TMP_DIR/mmv/<name> (default
// /var/lib/pcp/tmp/mmv/mmvapp), and pcp-exporter, running beside it and
// reading the same directory, serves the values on /metrics:
//
//	PCP_TMP_DIR=/tmp/demo go run ./examples/mmvapp &
//	go run ./cmd/pcp-exporter serve --mmv.dir=/tmp/demo/mmv
//	curl -s localhost:9464/metrics | grep mmv_mmvapp
//
// The application simulates a web shop: every tick, each endpoint serves a
// fixed number of requests (endpoint i serves i+1), each taking 12.5 ms and
// sending 2 Kbyte. The metrics use PCP units that the exporter converts to
// base units (milliseconds to seconds, Kbytes to bytes), so that the example
// shows the conversion:
//
//	mmv.mmvapp.requests      counter  count    per endpoint  -> mmv_mmvapp_requests_total
//	mmv.mmvapp.request_time  counter  millisec per endpoint  -> mmv_mmvapp_request_time_seconds_total
//	mmv.mmvapp.sent          counter  Kbyte    per endpoint  -> mmv_mmvapp_sent_bytes_total
//	mmv.mmvapp.in_flight     instant  count                  -> mmv_mmvapp_in_flight
//	mmv.mmvapp.version       discrete string                 -> mmv_mmvapp_version_info{value="..."}
//
// With -ticks N the values stop changing after N ticks (the process keeps
// running, so the file stays live for the exporter's PID check), which makes
// the values exact for tests.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source/mmv"
)

// Version is the application version published as mmv.mmvapp.version.
const Version = "1.4.2"

// Endpoints are the instances of the endpoint instance domain, in id order.
var Endpoints = []string{"/", "/cart", "/checkout"}

const (
	requestMillis = 12.5 // simulated time per request
	requestKbytes = 2    // simulated bytes sent per request, in Kbyte
)

// Config returns the MMV file layout of the application.
func Config() mmv.WriterConfig {
	inst := make([]mmv.InstanceDef, len(Endpoints))
	for i, e := range Endpoints {
		inst[i] = mmv.InstanceDef{ID: int32(i), Name: e}
	}
	count := semantics.Units{DimCount: 1}
	msec := semantics.Units{DimTime: 1, ScaleTime: semantics.TimeMSec}
	kbyte := semantics.Units{DimSpace: 1, ScaleSpace: semantics.SpaceKByte}
	return mmv.WriterConfig{
		InDoms: []mmv.InDomDef{{Serial: 1, Instances: inst, OneLine: "HTTP endpoints", Help: "The endpoints the shop serves."}},
		Metrics: []mmv.MetricDef{
			{Name: "requests", Item: 1, Type: mmv.TypeU64, Sem: semantics.SemCounter, Units: count, InDom: 1,
				OneLine: "requests served", Help: "Number of HTTP requests served, by endpoint."},
			{Name: "request_time", Item: 2, Type: mmv.TypeDouble, Sem: semantics.SemCounter, Units: msec, InDom: 1,
				OneLine: "time spent serving requests", Help: "Total time spent serving requests, by endpoint."},
			{Name: "sent", Item: 3, Type: mmv.TypeU64, Sem: semantics.SemCounter, Units: kbyte, InDom: 1,
				OneLine: "data sent", Help: "Response bytes sent, by endpoint, in Kbyte."},
			{Name: "in_flight", Item: 4, Type: mmv.TypeU32, Sem: semantics.SemInstant, Units: count,
				OneLine: "requests in progress"},
			{Name: "version", Item: 5, Type: mmv.TypeString, Sem: semantics.SemDiscrete,
				OneLine: "application version"},
		},
	}
}

// App holds the value handles of a running application.
type App struct {
	w                    *mmv.Writer
	requests, time, sent []mmv.Handle
	inFlight             mmv.Handle
	ticks                int
}

// New creates the MMV file at path and publishes the initial values.
func New(path string) (*App, error) {
	w, err := mmv.NewWriter(path, Config())
	if err != nil {
		return nil, err
	}
	a := &App{w: w}
	for _, e := range Endpoints {
		a.requests = append(a.requests, w.MustHandle("requests", e))
		a.time = append(a.time, w.MustHandle("request_time", e))
		a.sent = append(a.sent, w.MustHandle("sent", e))
	}
	a.inFlight = w.MustHandle("in_flight", "")
	if err := w.MustHandle("version", "").SetString(Version); err != nil {
		w.Close()
		return nil, err
	}
	return a, nil
}

// Tick simulates one interval of traffic: endpoint i serves i+1 requests.
func (a *App) Tick() {
	for i := range Endpoints {
		n := uint64(i + 1)
		a.inFlight.SetUint64(n)
		a.requests[i].Add(float64(n))
		a.time[i].Add(float64(n) * requestMillis)
		a.sent[i].Add(float64(n * requestKbytes))
	}
	a.inFlight.SetUint64(0)
	a.ticks++
}

// Close removes nothing: like libpcp_mmv, the file stays until the next
// start replaces it; pmdammv and pcp-exporter ignore it once the process is
// gone (PID check).
func (a *App) Close() error { return a.w.Close() }

func main() {
	var (
		dir      = flag.String("mmv.dir", mmv.DefaultDir(), "directory to write the MMV file into ($PCP_TMP_DIR/mmv)")
		name     = flag.String("name", "mmvapp", "MMV file name (the metric prefix mmv.<name>.)")
		interval = flag.Duration("interval", time.Second, "simulated traffic interval")
		ticks    = flag.Int("ticks", 0, "stop changing values after this many ticks (0: never); the process keeps running")
	)
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		log.Error("mmv directory", "err", err)
		os.Exit(1)
	}
	path := filepath.Join(*dir, *name)
	app, err := New(path)
	if err != nil {
		log.Error("create MMV file", "err", err)
		os.Exit(1)
	}
	defer app.Close()
	log.Info("writing MMV metrics", "file", path, "prefix", fmt.Sprintf("mmv.%s.", *name), "interval", *interval)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	t := time.NewTicker(*interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			log.Info("stopping", "ticks", app.ticks)
			return
		case <-t.C:
			if *ticks == 0 || app.ticks < *ticks {
				app.Tick()
				if app.ticks == *ticks {
					log.Info("values final", "ticks", app.ticks)
				}
			}
		}
	}
}
