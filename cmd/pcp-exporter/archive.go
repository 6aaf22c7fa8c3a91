package main

import (
	"embed"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/pcp-exporter/pcp-exporter/bridge"
	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
	"github.com/pcp-exporter/pcp-exporter/source/archive"
	"github.com/pcp-exporter/pcp-exporter/source/archive/pcplog"
)

// demoArchive is a 3-minute pmlogger recording of this project's corpus
// (load, CPU, memory, disks, network), served in a loop with --demo.
//
//go:embed demo/live.0.xz demo/live.meta demo/live.index
var demoArchive embed.FS

// archiveKindFlags declares serve's archive flags: --archive (followed or
// replayed), the replay's start, speed, loop and interpolation, and --demo.
func archiveKindFlags(cmd *kingpin.CmdClause, f *serveFlags) {
	cmd.Flag("archive", "PCP archive, directory of archives, or pmlogger farm (a directory of such directories) to serve instead of live MMV files (repeatable). An archive being written (its last record within 3 logging intervals plus 2 s of now), or a directory with pmlogger_check's Latest file, is followed: each scrape serves its values interpolated at the scrape's time minus --archive.delay (the latest values where it has not reached that time; pcp_exporter_source_served_timestamp_seconds says which archive time a scrape served), and a directory moves on to the newest archive pmlogger starts in it (rotation, restart). A followed archive with no new record for 3 logging intervals plus 2 s turns pcp_exporter_source_up to 0 with reason \"stalled\"; a path naming nothing, with reason \"missing\" until it appears. Other archives (and all with --replay.start) are replayed in real time as one timeline.").PlaceHolder("PATH").StringsVar(&f.archives)
	cmd.Flag("archive.delay", "How far behind the wall clock followed archives are served (0: one logging interval plus 1 s; pmlogger writes each record within 0.25 s).").Default("0s").DurationVar(&f.archiveDelay)
	cmd.Flag("replay.start", "Replay the archives instead of following them, the first scrape serving this archive time: RFC 3339, or +DURATION after the archive's start.").Default("+0s").IsSetByUser(&f.replayStartSet).StringVar(&f.replayStart)
	cmd.Flag("replay.speed", "Archive seconds per wall-clock second of a replay (greater than 0).").Default("1").Float64Var(&f.replaySpeed)
	cmd.Flag("replay.loop", "Start a replay over from --replay.start after the end of the archive (else its last values stay and pcp_exporter_source_up turns 0 with reason \"ended\").").BoolVar(&f.replayLoop)
	cmd.Flag("demo", "Serve the embedded demo recording in a loop instead of any other source: a 3-minute pmlogger archive (load, CPU, memory, disks, network) of the machine that made this project's test corpus, not this host's data. Refused with --archive, --pmcd or --mmv.dir.").BoolVar(&f.demo)
	cmd.Flag("replay.interp", "Interpolation rule for instant and discrete metrics of replayed and followed archives: nearest (PCP 6.3.2 and later) or prior (PCP 6.3.1 and earlier).").Default("nearest").EnumVar(&f.interp, "nearest", "prior")
}

// openArchiveKind opens serve's archives: the demo recording replayed in
// a loop, or each archive being written followed and the others replayed
// in real time as one timeline.
func openArchiveKind(f *serveFlags, o *opened, logger *slog.Logger) error {
	rule := semantics.InterpNearest
	if f.interp == "prior" {
		rule = semantics.InterpPrior
	}
	replayed := f.archives
	loop := f.replayLoop
	if f.demo {
		path, cleanup, err := extractDemo()
		if err != nil {
			return err
		}
		o.onClose(cleanup)
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
			o.onClose(func() { fo.Close() })
			var src source.Source = fo
			if src, err = f.derived.wrap(src, logger); err != nil {
				return err
			}
			if st := source.StatusOf(fo, time.Now()); st.Reason == source.ReasonMissing {
				logger.Warn("--archive names nothing (yet): waiting for it to appear, pcp_exporter_source_up 0 with reason missing meanwhile; check the path if that is a mistake", "path", fo.Path(), "err", st.Detail)
			} else {
				logger.Info("following the archives pmlogger writes", "path", fo.Path())
			}
			if err := fo.Truncated(); err != nil {
				logger.Warn("archive ends early: serving the records before", "err", err)
			}
			o.add("archive", bridge.Source{Name: fo.Path(), Src: src})
		}
	}
	if len(replayed) > 0 {
		src, closeReplay, err := openReplay(f, replayed, loop, rule, logger)
		if err != nil {
			return err
		}
		o.onClose(closeReplay)
		o.add("archive", src)
	}
	return nil
}

// openArchivesOnce opens the archives a command reading once names:
// replayed as one timeline, or with f.apart each a replay of its own.
func openArchivesOnce(f *onceFlags, o *opened, _ *slog.Logger) error {
	if f.archives == nil || len(*f.archives) == 0 {
		return nil
	}
	as, err := pcplog.OpenAll(*f.archives)
	if err != nil {
		return err
	}
	groups := [][]*pcplog.Archive{as}
	if f.apart {
		groups = nil
		for _, a := range as {
			groups = append(groups, []*pcplog.Archive{a})
		}
	}
	for _, g := range groups {
		rp, err := archive.NewReplay(g, archive.ReplayOptions{})
		if err != nil {
			for _, a := range as {
				a.Close()
			}
			return err
		}
		o.onClose(func() { rp.Close() }) // and its archives
		o.add("archive", bridge.Source{Name: g[0].Path(), Src: rp})
	}
	return nil
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

// openReplay opens the archives serve replays in real time as one
// timeline, from --replay.start at --replay.speed, with the derived
// metrics outermost; the function returned closes the replay.
func openReplay(f *serveFlags, replayed []string, loop bool, rule semantics.InterpRule, logger *slog.Logger) (bridge.Source, func(), error) {
	as, err := pcplog.OpenAll(replayed)
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

// parseWhen parses the value s of --flag: an RFC 3339 time or +DURATION
// after origin. Its errors name the flag and the value.
func parseWhen(flag, s string, origin time.Time) (time.Time, error) {
	if rest, ok := strings.CutPrefix(s, "+"); ok {
		d, err := time.ParseDuration(rest)
		if err != nil {
			if secs, err2 := strconv.ParseFloat(rest, 64); err2 == nil && !math.IsNaN(secs) && math.Abs(secs) < 1<<62/1e9 {
				return origin.Add(time.Duration(secs*1e9 + 0.5)), nil
			}
			return time.Time{}, usagef("--%s=%s: want RFC 3339 or +DURATION (%v)", flag, clip(s), err)
		}
		return origin.Add(d), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, usagef("--%s=%s: want RFC 3339 or +DURATION", flag, clip(s))
	}
	return t, nil
}

// checkWindow rejects a --start outside [first, last] (saying on which
// side) and a --finish before the start.
func checkWindow(start, finish, first, last time.Time, startFlag, finishFlag string) error {
	if start.IsZero() {
		start = first
	}
	switch {
	case start.Before(first):
		return usagef("--%s %s is before the start of the archives (%s)", startFlag, start.Format(time.RFC3339Nano), first.Format(time.RFC3339Nano))
	case start.After(last):
		return usagef("--%s %s is after the end of the archives (%s)", startFlag, start.Format(time.RFC3339Nano), last.Format(time.RFC3339Nano))
	case !finish.IsZero() && finish.Before(first):
		return usagef("--%s %s is before the start of the archives (%s)", finishFlag, finish.Format(time.RFC3339Nano), first.Format(time.RFC3339Nano))
	case !finish.IsZero() && finish.Before(start):
		return usagef("--%s %s is before --%s %s", finishFlag, finish.Format(time.RFC3339Nano), startFlag, start.Format(time.RFC3339Nano))
	}
	return nil
}
