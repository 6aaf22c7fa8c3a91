package main

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
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
	"github.com/pcp-exporter/pcp-exporter/mapping"
	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
	"github.com/pcp-exporter/pcp-exporter/source/archive"
	"github.com/pcp-exporter/pcp-exporter/source/mmv"
)

// demoArchive is a 3-minute pmlogger recording of this project's corpus
// (load, CPU, memory, disks, network), served in a loop with --demo.
//
//go:embed demo/live.0.xz demo/live.meta demo/live.index
var demoArchive embed.FS

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
			cmd.Flag("mmv.dir", "Directory of MMV files to export (default $PCP_TMP_DIR/mmv, else /var/lib/pcp/tmp/mmv).").Default(mmv.DefaultDir()).IsSetByUser(&f.mmvDirSet).StringVar(&f.mmvDir)
			cmd.Flag("mmv.pid-check", "Honour the PROCESS flag of MMV files as pmdammv does: export a file only while its writer's PID exists (turn off in a sidecar that cannot see the application's PID namespace).").Default("true").BoolVar(&f.pidCheck)
			cmd.Flag("archive", "PCP archive, directory of archives, or pmlogger farm (a directory of such directories) to serve instead of live MMV files (repeatable). An archive being written (its last record within 3 logging intervals plus 2 s of now), or a directory with pmlogger_check's Latest file, is followed: each scrape serves its values interpolated at the scrape's time minus --archive.delay (the latest values where it has not reached that time; pcp_exporter_source_served_timestamp_seconds says which archive time a scrape served), and a directory moves on to the newest archive pmlogger starts in it (rotation, restart). A followed archive with no new record for 3 logging intervals plus 2 s turns pcp_exporter_source_up to 0 with reason \"stalled\"; a path naming nothing, with reason \"missing\" until it appears. Other archives (and all with --replay.start) are replayed in real time as one timeline.").PlaceHolder("PATH").StringsVar(&f.archives)
			cmd.Flag("archive.delay", "How far behind the wall clock followed archives are served (0: one logging interval plus 1 s; pmlogger writes each record within 0.25 s).").Default("0s").DurationVar(&f.archiveDelay)
			cmd.Flag("replay.start", "Replay the archives instead of following them, the first scrape serving this archive time: RFC 3339, or +DURATION after the archive's start.").Default("+0s").IsSetByUser(&f.replayStartSet).StringVar(&f.replayStart)
			cmd.Flag("replay.speed", "Archive seconds per wall-clock second of a replay (greater than 0).").Default("1").Float64Var(&f.replaySpeed)
			cmd.Flag("replay.loop", "Start a replay over from --replay.start after the end of the archive (else its last values stay and pcp_exporter_source_up turns 0 with reason \"ended\").").BoolVar(&f.replayLoop)
			cmd.Flag("demo", "Serve the embedded demo recording in a loop instead of any other source: a 3-minute pmlogger archive (load, CPU, memory, disks, network) of the machine that made this project's test corpus, not this host's data. Refused with --archive, --pmcd or --mmv.dir.").BoolVar(&f.demo)
			cmd.Flag("replay.interp", "Interpolation rule for instant and discrete metrics of replayed and followed archives: nearest (PCP 6.3.2 and later) or prior (PCP 6.3.1 and earlier).").Default("nearest").EnumVar(&f.interp, "nearest", "prior")
			cmd.Flag("mapping.config", "Mapping configuration file (YAML: include/exclude, renames, labels; a pattern is a name with its subtree, as pminfo, a glob, or a /regexp/).").PlaceHolder("FILE").StringVar(&f.mappingFile)
			cmd.Flag("naming", "Naming of the exported metrics: default (Prometheus conventions, base units), pmproxy (as pmproxy's /metrics) or node (default, with the linux agent's host metrics under node_exporter's names); default: the mapping file's naming, else default.").EnumVar(&f.naming, "default", "pmproxy", "node")
			fullLabelsFlag(cmd, &f.fullLabels)
			withFlag(cmd, &f.lean)
			f.derived = addDerivedFlags(cmd)
			f.pmcd = addPMCDFlags(cmd, true)
			f.groups = addGroupFlags(cmd)
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

// mmvContext is the context of live MMV files, which have no PCP context
// labels of their own (pmcd would add them): the exporter's hostname.
func mmvContext() []mapping.LabelPair {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return nil
	}
	return []mapping.LabelPair{{Name: "hostname", Value: h}}
}

// extractDemo writes the embedded demo archive to a temporary directory.
func extractDemo() (string, func(), error) {
	dir, err := os.MkdirTemp("", "pcp-exporter-demo-")
	if err != nil {
		return "", nil, err
	}
	cleanup := func() { os.RemoveAll(dir) }
	err = fs.WalkDir(demoArchive, "demo", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := demoArchive.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, filepath.Base(p)), b, 0o444)
	})
	if err != nil {
		cleanup()
		return "", nil, err
	}
	return filepath.Join(dir, "live"), cleanup, nil
}

// openServeSources opens the sources serve exports.
func openServeSources(f *serveFlags, logger *slog.Logger) ([]bridge.Source, func(), error) {
	var srcs []bridge.Source
	var closers []func()
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	fail := func(err error) ([]bridge.Source, func(), error) {
		closeAll()
		return nil, nil, err
	}
	pmSrcs, closePMCD, auto, err := openPMCDSources(f, logger)
	if err != nil {
		return nil, nil, err
	}
	closers = append(closers, closePMCD)
	srcs = append(srcs, pmSrcs...)
	rule := semantics.InterpNearest
	if f.interp == "prior" {
		rule = semantics.InterpPrior
	}
	replayed := f.archives
	loop := f.replayLoop
	if f.demo {
		path, cleanup, err := extractDemo()
		if err != nil {
			return nil, nil, err
		}
		closers = append(closers, cleanup)
		logger.Info("serving the embedded demo recording in a loop: a 3-minute pmlogger archive of the machine that made this project's test corpus, not this host's data")
		replayed, loop = []string{path}, true
		if !f.replayStartSet {
			f.replayStart = "+2s" // past pmlogger's prologue record, so the first scrape has values
		}
	} else if len(f.archives) > 0 && !f.replayStartSet {
		var err error
		var followed []*archive.Follow
		followed, replayed = archive.FollowWritten(f.archives, archive.FollowOptions{Delay: f.archiveDelay, Interp: rule}, time.Now())
		for _, fo := range followed {
			closers = append(closers, func() { fo.Close() })
			var src source.Source = fo
			if src, err = f.derived.wrap(src, logger); err != nil {
				return fail(err)
			}
			if st := source.StatusOf(fo, time.Now()); st.Reason == source.ReasonMissing {
				logger.Warn("--archive names nothing (yet): waiting for it to appear, pcp_exporter_source_up 0 with reason missing meanwhile; check the path if that is a mistake", "path", fo.Path(), "err", st.Detail)
			} else {
				logger.Info("following the archives pmlogger writes", "path", fo.Path())
			}
			if err := fo.Truncated(); err != nil {
				logger.Warn("archive ends early: serving the records before", "err", err)
			}
			srcs = append(srcs, bridge.Source{Name: fo.Path(), Src: src})
		}
	}
	if len(replayed) > 0 {
		src, closeReplay, err := openReplay(f, replayed, loop, rule, logger)
		if err != nil {
			return fail(err)
		}
		closers = append(closers, closeReplay)
		srcs = append(srcs, src)
	}
	if len(srcs) > len(pmSrcs) {
		return srcs, closeAll, nil // archives (and any pmcd named)
	}
	if len(pmSrcs) > 0 && !auto && !f.mmvDirSet {
		return srcs, closeAll, nil // pmcd only: its mmv subtree has the MMV files
	}
	if _, err := os.Stat(f.mmvDir); err != nil && !f.mmvDirSet {
		if auto {
			return srcs, closeAll, nil // the local pmcd, and no MMV directory
		}
		return nil, nil, fmt.Errorf("nothing to serve: no MMV directory %s (--mmv.dir), no archive (--archive) and no pmcd named or answering (--pmcd); --demo serves an embedded sample recording", f.mmvDir)
	}
	d, err := mmv.OpenDir(f.mmvDir, mmv.Options{PIDCheck: f.pidCheck, Logger: logger})
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	closers = append(closers, func() { d.Close() })
	var src source.Source = d
	if src, err = f.derived.wrap(src, logger); err != nil {
		return fail(err)
	}
	srcs = append(srcs, bridge.Source{Name: f.mmvDir, Src: src, Context: mmvContext()})
	return srcs, closeAll, nil
}

// openReplay opens the archives serve replays in real time as one
// timeline, from --replay.start at --replay.speed, with the derived
// metrics outermost; the function returned closes the replay.
func openReplay(f *serveFlags, replayed []string, loop bool, rule semantics.InterpRule, logger *slog.Logger) (bridge.Source, func(), error) {
	as, err := archive.OpenAll(replayed)
	if err != nil {
		return bridge.Source{}, nil, err
	}
	rp, err := archive.NewReplay(as, archive.ReplayOptions{Interp: rule})
	if err != nil {
		return bridge.Source{}, nil, err
	}
	fail := func(err error) (bridge.Source, func(), error) {
		rp.Close()
		return bridge.Source{}, nil, err
	}
	start, err := parseWhen("replay.start", f.replayStart, rp.Start())
	if err != nil {
		return fail(err)
	}
	end, err := rp.End()
	if err != nil {
		return fail(err)
	}
	if err := checkWindow(start, time.Time{}, rp.Start(), end, "replay.start", ""); err != nil {
		return fail(err)
	}
	// found while looking for the end: a last record cut short, a
	// zero-filled tail (the records before are served, as libpcp does)
	for _, a := range as {
		if err := a.Truncated(); err != nil {
			logger.Warn("archive ends early: serving the records before", "err", err)
		}
	}
	clock := &bridge.ReplayClock{Start: start, Speed: f.replaySpeed, Loop: loop, End: rp.End}
	// derived metrics outermost, where a reload finds and replaces them
	src, err := f.derived.wrap(clock.Watch(rp), logger)
	if err != nil {
		return fail(err)
	}
	name := replayed[0]
	if len(replayed) > 1 {
		name = fmt.Sprintf("%s (+%d)", replayed[0], len(replayed)-1)
	}
	if !f.demo {
		logger.Info("replaying archives in real time", "path", name, "from", start.UTC().Format(time.RFC3339Nano), "speed", f.replaySpeed, "loop", loop)
	}
	return bridge.Source{Name: name, Src: src, When: clock.When}, func() { rp.Close() }, nil
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
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	registerPMCD(reg, srcs)

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
