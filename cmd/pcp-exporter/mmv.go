package main

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"

	"github.com/alecthomas/kingpin/v2"

	"github.com/pcp-exporter/pcp-exporter/bridge"
	"github.com/pcp-exporter/pcp-exporter/mapping"
	"github.com/pcp-exporter/pcp-exporter/source"
	"github.com/pcp-exporter/pcp-exporter/source/mmv"
)

// mmvFlags are the MMV source flags of info and fetch.
type mmvFlags struct {
	path     string
	pidCheck bool
}

func addMMVFlags(cmd *kingpin.CmdClause, required bool) *mmvFlags {
	f := &mmvFlags{}
	fl := cmd.Flag("mmv", "MMV file, or directory of MMV files (as $PCP_TMP_DIR/mmv).").PlaceHolder("PATH")
	if required {
		fl = fl.Required()
	}
	fl.StringVar(&f.path)
	cmd.Flag("mmv.pid-check", "Honour the PROCESS flag of MMV files as pmdammv does: export a file only while its writer's PID exists (turn off when the writer lives in another PID namespace).").
		Default("true").BoolVar(&f.pidCheck)
	return f
}

// openMMV opens an MMV file or directory as a source.
func openMMV(path string, pidCheck bool, logger *slog.Logger) (source.Source, error) {
	st, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("mmv: %s: no such file or directory", path)
		}
		return nil, err
	}
	opts := mmv.Options{PIDCheck: pidCheck, Logger: logger}
	if st.IsDir() {
		return mmv.OpenDir(path, opts)
	}
	f, err := mmv.OpenFile(path, opts)
	if errors.Is(err, mmv.ErrProcessGone) {
		return nil, fmt.Errorf("%w; --no-mmv.pid-check exports it anyway (for a writer in another PID namespace)", err)
	}
	return f, err
}

// mmvKindFlags declares serve's MMV flags: the directory and the PID check.
func mmvKindFlags(cmd *kingpin.CmdClause, f *serveFlags) {
	cmd.Flag("mmv.dir", "Directory of MMV files to export (default $PCP_TMP_DIR/mmv, else /var/lib/pcp/tmp/mmv).").Default(mmv.DefaultDir()).IsSetByUser(&f.mmvDirSet).StringVar(&f.mmvDir)
	cmd.Flag("mmv.pid-check", "Honour the PROCESS flag of MMV files as pmdammv does: export a file only while its writer's PID exists (turn off in a sidecar that cannot see the application's PID namespace).").Default("true").BoolVar(&f.pidCheck)
}

// openMMVKind opens serve's MMV directory: when it is named
// (--mmv.dir), next to the local pmcd found with no source flag (when the
// directory exists), or when nothing else is named. A pmcd named alone
// serves the MMV files in its mmv subtree, and archives go alone.
func openMMVKind(f *serveFlags, o *opened, logger *slog.Logger) error {
	if o.count["archive"] > 0 {
		return nil // archives (and any pmcd named)
	}
	if o.count["pmcd"] > 0 && !o.auto && !f.mmvDirSet {
		return nil // pmcd only: its mmv subtree has the MMV files
	}
	if _, err := os.Stat(f.mmvDir); err != nil && !f.mmvDirSet {
		if o.auto {
			return nil // the local pmcd, and no MMV directory
		}
		return fmt.Errorf("nothing to serve: no MMV directory %s (--mmv.dir), no archive (--archive) and no pmcd named or answering (--pmcd); --demo serves an embedded sample recording", f.mmvDir)
	}
	d, err := mmv.OpenDir(f.mmvDir, mmv.Options{PIDCheck: f.pidCheck, Logger: logger})
	if err != nil {
		return err
	}
	o.onClose(func() { d.Close() })
	var src source.Source = d
	if src, err = f.derived.wrap(src, logger); err != nil {
		return err
	}
	o.add("mmv", bridge.Source{Name: f.mmvDir, Src: src, Context: mmvContext()})
	return nil
}

// openMMVOnce opens the MMV file or directory a command reading once
// names, with the exporter's hostname as context (mmvContext).
func openMMVOnce(f *onceFlags, o *opened, logger *slog.Logger) error {
	if f.mmv == nil || f.mmv.path == "" {
		return nil
	}
	src, err := openMMV(f.mmv.path, f.mmv.pidCheck, logger)
	if err != nil {
		return err
	}
	o.onClose(func() { src.Close() })
	o.add("mmv", bridge.Source{Name: f.mmv.path, Src: src, Context: mmvContext()})
	return nil
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
