package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"os"

	"github.com/alecthomas/kingpin/v2"

	"github.com/pcp-exporter/pcp-exporter/mapping"
)

// fullLabelsFlag adds --mapping.full-labels to a command.
func fullLabelsFlag(cmd *kingpin.CmdClause, v *bool) {
	cmd.Flag("mapping.full-labels", "Every PCP label on every series and no target_info, as before lean labels (the mapping file's full_labels).").BoolVar(v)
}

// mappingFlags are the flags of the mapping command.
type mappingFlags struct {
	mmv         *mmvFlags
	archives    []string
	mappingFile string
	naming      string
	fullLabels  bool
	lean        leanFlags
	format      string
	derived     *derivedFlags
	metrics     []string
}

func mappingCommand() command {
	return command{
		name: "mapping",
		help: "Print how each PCP metric of a source maps: Prometheus family, type, unit, scale and labels; OpenTelemetry instrument, kind, unit and attributes.",
		setup: func(cmd *kingpin.CmdClause) func() error {
			f := &mappingFlags{mmv: addMMVFlags(cmd, false)}
			cmd.Flag("archive", "PCP archive (repeatable, as for serve) instead of --mmv.").PlaceHolder("PATH").StringsVar(&f.archives)
			cmd.Flag("mapping.config", "Mapping configuration file (as for serve).").PlaceHolder("FILE").StringVar(&f.mappingFile)
			cmd.Flag("naming", "Naming: default, pmproxy, node or hostmetrics (as for serve).").EnumVar(&f.naming, "default", "pmproxy", "node", "hostmetrics")
			fullLabelsFlag(cmd, &f.fullLabels)
			withFlag(cmd, &f.lean)
			cmd.Flag("format", "Output format: table or json.").Default("table").EnumVar(&f.format, "table", "json")
			f.derived = addDerivedFlags(cmd)
			cmd.Arg("metric", "Metrics or subtrees (all when none is given).").StringsVar(&f.metrics)
			return func() error { return runMapping(os.Stdout, f) }
		},
	}
}

func runMapping(w io.Writer, f *mappingFlags) error {
	if (f.mmv.path == "") == (len(f.archives) == 0) {
		return usagef("give either --mmv or --archive")
	}
	mapper, err := newMapper(f.mappingFile, f.naming, f.fullLabels, &f.lean)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	o, err := openOnce(&onceFlags{mmv: f.mmv, archives: &f.archives, logger: logger}, "mmv", "archive")
	if err != nil {
		return err
	}
	defer o.close()
	src, context := o.srcs[0].Src, o.srcs[0].Context
	if src, err = f.derived.wrap(src, logger); err != nil {
		return err
	}
	src = mapper.Wrap(src) // the node naming's families
	selected, err := selectMetrics(src.Metrics(), f.metrics)
	if err != nil {
		return err
	}
	m := mapping.Describe(src, context, selected, mapper)
	if f.format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(m)
	}
	return m.WriteTable(w)
}
