package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/promslog"
	promslogflag "github.com/prometheus/common/promslog/flag"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"
	"github.com/prometheus/exporter-toolkit/web/kingpinflag"

	"github.com/pcp-exporter/pcp-exporter/bridge"
	"github.com/pcp-exporter/pcp-exporter/bridge/httpd"
	"github.com/pcp-exporter/pcp-exporter/internal/processmetric"
	"github.com/pcp-exporter/pcp-exporter/mapping"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// serveFlags are the flags of serve.
type serveFlags struct {
	web         *web.FlagConfig
	log         promslog.Config
	telemetry   string
	mmvDir      string
	mmvDirSet   bool
	pidCheck    bool
	archives    []string
	replayStart string
	// replayStartSet: --replay.start given, so archives are replayed,
	// not followed
	replayStartSet bool
	archiveDelay   time.Duration
	demo           bool
	replaySpeed    float64
	replayLoop     bool
	interp         string
	mappingFile    string
	naming         string
	fullLabels     bool
	lean           leanFlags
	maxRequests    int
	http           *httpd.Config
	omCreated      bool
	derived        *derivedFlags
	pmcd           *pmcdFlags
	groups         *groupFlags
	// otlp is the push next to /metrics (when an endpoint is set).
	otlp *bridge.OTLPConfig
}

func serveCommand() command {
	return command{
		name:      "serve",
		help:      "Serve PCP metrics (pmcd, MMV files, archives being written or replayed) on /metrics for Prometheus (the default command).",
		isDefault: true,
		setup: func(cmd *kingpin.CmdClause) func() error {
			f := &serveFlags{}
			f.web = kingpinflag.AddFlags(cmd, ":9464")
			f.log.Level = promslog.NewLevel()
			cmd.Flag(promslogflag.LevelFlagName, promslogflag.LevelFlagHelp).Default("info").HintOptions(promslog.LevelFlagOptions...).SetValue(f.log.Level)
			f.log.Format = promslog.NewFormat()
			cmd.Flag(promslogflag.FormatFlagName, promslogflag.FormatFlagHelp).Default("logfmt").HintOptions(promslog.FormatFlagOptions...).SetValue(f.log.Format)
			cmd.Flag("web.telemetry-path", "Path under which to expose metrics.").Default("/metrics").StringVar(&f.telemetry)
			cmd.Flag("web.max-requests", "Maximum number of parallel scrape requests that read the sources (0 disables the limit); text and OpenMetrics scrapes arriving while one is read share its result and are not counted.").Default("40").IntVar(&f.maxRequests)
			f.http = addHTTPFlags(cmd)
			cmd.Flag("openmetrics.created", "In OpenMetrics scrapes, a _created sample after each counter sample whose start is known: the MMV file's creation, pmcd's start, an archive's start or last <mark> (README: Counter starts). Off by default, as in promhttp: Prometheus 2.x (and 3.x unless its created-timestamp zero ingestion is on) stores each _created as a series of its own.").BoolVar(&f.omCreated)
			for _, k := range sourceKinds {
				k.flags(cmd, f)
			}
			cmd.Flag("mapping.config", "Mapping configuration file (YAML: include/exclude, renames, labels; a pattern is a name with its subtree, as pminfo, a glob, or a /regexp/).").PlaceHolder("FILE").StringVar(&f.mappingFile)
			cmd.Flag("naming", "Naming of the exported metrics: default (Prometheus conventions, base units), pmproxy (as pmproxy's /metrics), node (default, with the linux agent's host metrics under node_exporter's names) or hostmetrics (default, with them as the OTel Collector hostmetrics receiver's metrics: system.cpu.time, ...); default: the mapping file's naming, else default.").EnumVar(&f.naming, "default", "pmproxy", "node", "hostmetrics")
			fullLabelsFlag(cmd, &f.fullLabels)
			withFlag(cmd, &f.lean)
			f.derived = addDerivedFlags(cmd)
			f.otlp = addOTLPFlags(cmd)
			return func() error { return runServe(f) }
		},
	}
}

// newMapper builds the mapper of --mapping.config, --naming, (when
// set) --mapping.full-labels, and the lean rules' flags (nil: none).
func newMapper(file, naming string, fullLabels bool, lean *leanFlags) (*mapping.Mapper, error) {
	var cfg *mapping.Config
	if file != "" {
		c, err := mapping.LoadConfig(file)
		if err != nil {
			return nil, err
		}
		cfg = c
	}
	opts := lean.options()
	if naming != "" { // the flag, else the mapping file's naming
		n, err := mapping.ParseNaming(naming)
		if err != nil {
			return nil, usagef("%v", err)
		}
		opts.Naming = &n
	}
	if fullLabels {
		opts.FullLabels = &fullLabels
	}
	return mapping.New(cfg, opts)
}

// check rejects flag values serve cannot use, naming the flag and the value.
func (f *serveFlags) check() error {
	switch p := f.telemetry; {
	case p == "":
		return usagef("--web.telemetry-path is empty: want a path such as /metrics")
	case !strings.HasPrefix(p, "/"):
		return usagef("--web.telemetry-path=%q: want a path starting with /, such as %q", p, "/"+p)
	case p == "/-/healthy" || p == "/-/ready":
		return usagef("--web.telemetry-path=%q: that path is the exporter's own health check", p)
	}
	if err := checkSpeed(f.replaySpeed); err != nil {
		return err
	}
	if f.maxRequests < 0 {
		return usagef("--web.max-requests=%d: want 0 (no limit) or more", f.maxRequests)
	}
	if f.archiveDelay < 0 {
		return usagef("--archive.delay=%v: must not be negative", f.archiveDelay)
	}
	if f.demo {
		for flag, set := range map[string]bool{"--archive": len(f.archives) > 0, "--pmcd": len(f.pmcd.specs) > 0, "--mmv.dir": f.mmvDirSet} {
			if set {
				return usagef("--demo serves the embedded recording instead of any other source: drop %s or --demo", flag)
			}
		}
	}
	if err := checkOTLP(f.otlp); err != nil {
		return err
	}
	return checkHTTP(f.http)
}

// checkSpeed rejects a --replay.speed that is not a positive finite number.
func checkSpeed(v float64) error {
	if !(v > 0) || math.IsInf(v, 0) {
		return usagef("--replay.speed=%v: want a positive finite number (archive seconds per wall-clock second)", v)
	}
	return nil
}

func runServe(f *serveFlags) error {
	if err := f.check(); err != nil {
		return err
	}
	logger := clipLogger(promslog.New(&f.log))
	f.lean.metrics = f.pmcd.metrics
	mapper, err := newMapper(f.mappingFile, f.naming, f.fullLabels, &f.lean)
	if err != nil {
		return err
	}
	srcs, closeSrcs, err := openServeSources(f, logger)
	if err != nil {
		return err
	}
	defer closeSrcs()
	col := bridge.New(mapper, logger, srcs...)
	// reg has everything but the PCP samples, which the fast path (text
	// and OpenMetrics) writes itself; WithSamples adds them for the scrapes
	// client_golang renders (protobuf).
	reg := prometheus.NewRegistry()
	reg.MustRegister(versioncollector.NewCollector("pcp_exporter"), col.Self(),
		collectors.NewGoCollector(), processmetric.New())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	stopPush, err := startServePush(ctx, f, logger, reg, col)
	if err != nil {
		return err
	}
	defer stopPush()

	probes, err := newProbeHandler(f, mapper, logger)
	if err != nil {
		return err
	}
	targets := []bridge.Reconfigurable{col} // the push reads through col
	if probes != nil {
		defer probes.Close()
		reg.MustRegister(probes)
		targets = append([]bridge.Reconfigurable{probes}, targets...) // first: a config that fails changes nothing
	}
	rl := newReloader(f, targets, logger, reg)
	rl.Watch(ctx)
	// Liveness: a probe of the sources' status takes an MMV directory's
	// lock; a read stuck holding it fails /-/healthy.
	wd := httpd.NewWatchdog(f.http.HealthTimeout, f.http.WriteTimeout, func() {
		for _, s := range srcs {
			source.StatusOf(s.Src, time.Now())
		}
	})
	mux := http.NewServeMux()
	mux.Handle("/-/reload", rl)
	mux.Handle(f.telemetry, wd.Track(col.Handler(reg, col.WithSamples(reg), promhttp.HandlerOpts{
		ErrorLog:                            slog.NewLogLogger(logger.Handler(), slog.LevelError),
		ErrorHandling:                       promhttp.ContinueOnError,
		MaxRequestsInFlight:                 f.maxRequests,
		EnableOpenMetrics:                   true,
		EnableOpenMetricsTextCreatedSamples: f.omCreated,
		Registry:                            reg,
	})))
	if probes != nil {
		mux.Handle("/probe", probes)
	}
	mux.Handle("/-/healthy", wd.Healthy(logger))
	// A first read makes the sources ready; a scrape does it too.
	mux.Handle("/-/ready", &httpd.Readiness{Ready: col.Ready(), Read: func() { col.WriteText(io.Discard) }, Every: time.Second})
	if f.telemetry != "/" {
		landing, err := web.NewLandingPage(web.LandingConfig{
			Name:        "PCP Exporter",
			Description: "Performance Co-Pilot metrics (MMV files and archives) for Prometheus and OpenTelemetry",
			Version:     version.Info(),
			Links: []web.LandingLinks{
				{Address: f.telemetry, Text: "Metrics"},
				{Address: "/-/healthy", Text: "Health"},
				{Address: "/-/ready", Text: "Readiness"},
			},
			Profiling: "false", // no /debug/pprof is served
		})
		if err != nil {
			return err
		}
		mux.Handle("/", landing)
	}
	get := httpd.GetOnly(mux)
	server := f.http.Server(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/-/reload" {
			mux.ServeHTTP(w, r) // POST or PUT, checked by the reloader
			return
		}
		get.ServeHTTP(w, r)
	}))
	listeners, err := httpd.Listen(f.web, logger)
	if errors.Is(err, httpd.ErrNoListenAddress) {
		return usageError{err}
	}
	if err != nil {
		return err
	}
	server.ErrorLog = httpd.ErrorLog(logger, time.Minute)
	listeners = httpd.LogFailedLogins(server, listeners, logger, 10*time.Second, &httpd.LoginGuard{WebConfigFile: *f.web.WebConfigFile})
	logger.Info("starting pcp-exporter", "version", version.Info(), "sources", len(srcs),
		"read_timeout", f.http.ReadTimeout, "write_timeout", f.http.WriteTimeout, "idle_timeout", f.http.IdleTimeout, "max_connections", f.http.MaxConns)
	return httpd.Serve(ctx, listeners, server, f.web, logger)
}
