package main

import (
	"regexp"

	"github.com/alecthomas/kingpin/v2"

	"github.com/pcp-exporter/pcp-exporter/source"
	"github.com/pcp-exporter/pcp-exporter/source/procgroup"
)

// groupFlags are --procgroups and --procgroups.match.
type groupFlags struct {
	on    bool
	match string
}

func addGroupFlags(cmd *kingpin.CmdClause) *groupFlags {
	f := &groupFlags{}
	cmd.Flag("procgroups", "Export process groups of pmcd's proc agent, as process-exporter does: procgroup_count, _cpu_user/_sys_seconds_total, _memory_rss_bytes, _io_read/_write_bytes_total, _fds, _threads per command name (instname), summed over the group's processes; a group stays once seen and its counters keep the last counts of processes that exited.").BoolVar(&f.on)
	cmd.Flag("procgroups.match", "With --procgroups, group only the processes whose command name (proc.psinfo.cmd) this regular expression matches, by its first submatch (else the whole match).").PlaceHolder("REGEXP").StringVar(&f.match)
	return f
}

// wrap adds the groups to a pmcd source when asked.
func (f *groupFlags) wrap(src source.Source) (source.Source, error) {
	if f == nil || !f.on && f.match == "" {
		return src, nil
	}
	var opts procgroup.Options
	if f.match != "" {
		re, err := regexp.Compile(f.match)
		if err != nil {
			return nil, usagef("--procgroups.match: %v", err)
		}
		opts.Match = re
	}
	return procgroup.New(src, opts), nil
}
