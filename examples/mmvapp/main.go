// Command mmvapp is a small application instrumented with PCP's Memory Mapped
// Values (MMV) through mmvwrite.Writer, the pure-Go writer in source/mmv/mmvwrite (files
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

	"github.com/pcp-exporter/pcp-exporter/examples/mmvapp/shop"
	"github.com/pcp-exporter/pcp-exporter/source/mmv/mmvwrite"
)

func main() {
	var (
		dir      = flag.String("mmv.dir", mmvwrite.DefaultDir(), "directory to write the MMV file into ($PCP_TMP_DIR/mmv)")
		name     = flag.String("name", "mmvapp", "MMV file name (the metric prefix mmv.<name>.)")
		interval = flag.Duration("interval", time.Second, "simulated traffic interval")
		ticks    = flag.Int("ticks", 0, "stop changing values after this many ticks (0: never); the process keeps running")
		version  = flag.Bool("version", false, "print the version and exit")
	)
	flag.Parse()
	if *version {
		fmt.Printf("mmvapp %s\n", shop.Version)
		return
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		log.Error("mmv directory", "err", err)
		os.Exit(1)
	}
	path := filepath.Join(*dir, *name)
	app, err := shop.New(path)
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
			log.Info("stopping", "ticks", app.Ticks())
			return
		case <-t.C:
			if *ticks == 0 || app.Ticks() < *ticks {
				app.Tick()
				if app.Ticks() == *ticks {
					log.Info("values final", "ticks", app.Ticks())
				}
			}
		}
	}
}
