package main

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/promslog"
	promslogflag "github.com/prometheus/common/promslog/flag"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"
	"github.com/prometheus/exporter-toolkit/web/kingpinflag"

	"github.com/pcp-exporter/pcp-exporter/bridge"
	"github.com/pcp-exporter/pcp-exporter/mapping"
	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
	"github.com/pcp-exporter/pcp-exporter/source/archive"
	"github.com/pcp-exporter/pcp-exporter/source/mmv"
)

// demoArchive is a 3-minute pmlogger recording of this project's corpus
// (load, CPU, memory, disks, network), served in a loop when serve is given
// neither --mmv.dir nor --archive and the default MMV directory is missing
// or empty.
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
	replaySpeed float64
	replayLoop  bool
	interp      string
	mappingFile string
	naming      string
	maxRequests int
	derived     *derivedFlags
	pmcd        *pmcdFlags
	// otlpStarters start pushes next to /metrics; open opens sources of
	// their own.
	otlpStarters []func(ctx context.Context, logger *slog.Logger, reg prometheus.Registerer, open func() ([]bridge.Source, func(), error), mapper *mapping.Mapper) (func(), error)
}

// serveHooks lets other command files (OTLP push) add flags to serve and
// start with it.
var serveHooks []func(cmd *kingpin.CmdClause, f *serveFlags)

func init() {
	addCommand(command{
		name:      "serve",
		help:      "Serve PCP metrics (pmcd, MMV files, or archives replayed in real time) on /metrics for Prometheus (the default command).",
		isDefault: true,
		setup: func(cmd *kingpin.CmdClause) func() error {
			f := &serveFlags{}
			f.web = kingpinflag.AddFlags(cmd, ":9464")
			f.log.Level = promslog.NewLevel()
			cmd.Flag(promslogflag.LevelFlagName, promslogflag.LevelFlagHelp).Default("info").HintOptions(promslog.LevelFlagOptions...).SetValue(f.log.Level)
			f.log.Format = promslog.NewFormat()
			cmd.Flag(promslogflag.FormatFlagName, promslogflag.FormatFlagHelp).Default("logfmt").HintOptions(promslog.FormatFlagOptions...).SetValue(f.log.Format)
			cmd.Flag("web.telemetry-path", "Path under which to expose metrics.").Default("/metrics").StringVar(&f.telemetry)
			cmd.Flag("web.max-requests", "Maximum number of parallel scrape requests (0 disables the limit).").Default("40").IntVar(&f.maxRequests)
			cmd.Flag("mmv.dir", "Directory of MMV files to export (default $PCP_TMP_DIR/mmv, else /var/lib/pcp/tmp/mmv).").Default(mmv.DefaultDir()).IsSetByUser(&f.mmvDirSet).StringVar(&f.mmvDir)
			cmd.Flag("mmv.pid-check", "Honour the PROCESS flag of MMV files as pmdammv does: export a file only while its writer's PID exists (turn off in a sidecar that cannot see the application's PID namespace).").Default("true").BoolVar(&f.pidCheck)
			cmd.Flag("archive", "PCP archive to replay in real time instead of live MMV files (repeatable: several archives form one timeline; a directory stands for its archives).").PlaceHolder("PATH").StringsVar(&f.archives)
			cmd.Flag("replay.start", "Archive time served by the first scrape: RFC 3339, or +DURATION after the archive's start.").Default("+0s").StringVar(&f.replayStart)
			cmd.Flag("replay.speed", "Archive seconds per wall-clock second.").Default("1").Float64Var(&f.replaySpeed)
			cmd.Flag("replay.loop", "Start over from --replay.start after the end of the archive (else the last values stay).").BoolVar(&f.replayLoop)
			cmd.Flag("replay.interp", "Interpolation rule for instant and discrete metrics: nearest or prior.").Default("nearest").EnumVar(&f.interp, "nearest", "prior")
			cmd.Flag("mapping.config", "Mapping configuration file (YAML: include/exclude, renames, labels).").PlaceHolder("FILE").StringVar(&f.mappingFile)
			cmd.Flag("naming", "Naming of the exported metrics: default (Prometheus conventions, base units) or pmproxy (as pmproxy's /metrics).").Default("default").EnumVar(&f.naming, "default", "pmproxy")
			f.derived = addDerivedFlags(cmd)
			f.pmcd = addPMCDFlags(cmd, true)
			for _, h := range serveHooks {
				h(cmd, f)
			}
			return func() error { return runServe(f) }
		},
	})
}

// newMapper builds the mapper of --mapping.config and --naming.
func newMapper(file, naming string) (*mapping.Mapper, error) {
	var cfg *mapping.Config
	if file != "" {
		c, err := mapping.LoadConfig(file)
		if err != nil {
			return nil, err
		}
		cfg = c
	}
	n, err := mapping.ParseNaming(naming)
	if err != nil {
		return nil, usagef("%v", err)
	}
	return mapping.New(cfg, mapping.Options{Naming: &n})
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
	pmSrcs, closePMCD, auto, err := openPMCDSources(f, logger)
	if err != nil {
		return nil, nil, err
	}
	closers = append(closers, closePMCD)
	srcs = append(srcs, pmSrcs...)
	archives := f.archives
	loop := f.replayLoop
	if len(archives) == 0 && !auto && len(pmSrcs) == 0 {
		if ents, err := os.ReadDir(f.mmvDir); (err != nil || len(ents) == 0) && !f.mmvDirSet {
			path, cleanup, err := extractDemo()
			if err != nil {
				return nil, nil, err
			}
			closers = append(closers, cleanup)
			logger.Info("no MMV file in the default directory and no --archive: serving the embedded demo archive in a loop", "mmv.dir", f.mmvDir)
			archives, loop = []string{path}, true
			if f.replayStart == "+0s" {
				f.replayStart = "+2s" // past pmlogger's prologue record, so the first scrape has values
			}
		}
	}
	if len(archives) > 0 {
		as, err := openArchives(archives)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		rule := semantics.InterpNearest
		if f.interp == "prior" {
			rule = semantics.InterpPrior
		}
		rp, err := archive.NewReplay(as, archive.ReplayOptions{Interp: rule})
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		start, err := parseWhen(f.replayStart, rp.Start())
		if err != nil {
			rp.Close()
			closeAll()
			return nil, nil, err
		}
		var src source.Source = rp
		closers = append(closers, func() { rp.Close() })
		if src, err = f.derived.wrap(src, logger); err != nil {
			closeAll()
			return nil, nil, err
		}
		clock := &bridge.ReplayClock{Start: start, Speed: f.replaySpeed, Loop: loop, End: rp.End}
		name := archives[0]
		if len(archives) > 1 {
			name = fmt.Sprintf("%s (+%d)", archives[0], len(archives)-1)
		}
		srcs = append(srcs, bridge.Source{Name: name, Src: src, When: clock.When})
		return srcs, closeAll, nil
	}
	if len(pmSrcs) > 0 && !auto && !f.mmvDirSet {
		return srcs, closeAll, nil // pmcd only: its mmv subtree has the MMV files
	}
	d, err := mmv.OpenDir(f.mmvDir, mmv.Options{PIDCheck: f.pidCheck, Logger: logger})
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	closers = append(closers, func() { d.Close() })
	var src source.Source = d
	if src, err = f.derived.wrap(src, logger); err != nil {
		closeAll()
		return nil, nil, err
	}
	srcs = append(srcs, bridge.Source{Name: f.mmvDir, Src: src})
	return srcs, closeAll, nil
}

func runServe(f *serveFlags) error {
	logger := promslog.New(&f.log)
	mapper, err := newMapper(f.mappingFile, f.naming)
	if err != nil {
		return err
	}
	srcs, closeSrcs, err := openServeSources(f, logger)
	if err != nil {
		return err
	}
	defer closeSrcs()
	col := bridge.New(mapper, logger, srcs...)
	// reg has everything but the PCP samples, which the text fast path
	// writes itself; full adds them for OpenMetrics and protobuf scrapes.
	reg := prometheus.NewRegistry()
	reg.MustRegister(versioncollector.NewCollector("pcp_exporter"), col.Self(),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	registerPMCD(reg, srcs)
	full := prometheus.Gatherers{pcpOnly{col}, reg} // samples first: the self-metrics describe that read

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	open := func() ([]bridge.Source, func(), error) { return openServeSources(f, logger) }
	for _, start := range f.otlpStarters {
		stopPush, err := start(ctx, logger, reg, open, mapper)
		if err != nil {
			return err
		}
		defer stopPush()
	}

	mux := http.NewServeMux()
	mux.Handle(f.telemetry, col.Handler(reg, full, promhttp.HandlerOpts{
		ErrorLog:            slog.NewLogLogger(logger.Handler(), slog.LevelError),
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: f.maxRequests,
		EnableOpenMetrics:   true,
		Registry:            reg,
	}))
	mux.HandleFunc("/-/healthy", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "Healthy")
	})
	mux.HandleFunc("/-/ready", func(w http.ResponseWriter, _ *http.Request) {
		select {
		case <-col.Ready():
			fmt.Fprintln(w, "Ready")
		default:
			// A first read makes the sources ready; a scrape does it too.
			col.WriteText(io.Discard)
			select {
			case <-col.Ready():
				fmt.Fprintln(w, "Ready")
			default:
				http.Error(w, "Not ready: a source has not been read successfully yet", http.StatusServiceUnavailable)
			}
		}
	})
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
		})
		if err != nil {
			return err
		}
		mux.Handle("/", landing)
	}
	server := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	logger.Info("starting pcp-exporter", "version", version.Info(), "sources", len(srcs))
	errc := make(chan error, 1)
	go func() { errc <- web.ListenAndServe(server, f.web, logger) }()
	select {
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	case <-ctx.Done():
		logger.Info("shutting down")
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return server.Shutdown(sctx)
	}
}

// pcpOnly gathers the PCP samples of a Collector (without its
// self-metrics, which the registry has through Self).
type pcpOnly struct{ c *bridge.Collector }

func (p pcpOnly) Gather() ([]*dto.MetricFamily, error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(bridge.SamplesOnly(p.c)); err != nil {
		return nil, err
	}
	return reg.Gather()
}
