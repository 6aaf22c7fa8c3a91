package main

import (
	"bufio"
	"io"
	"os"
	"sort"

	"github.com/alecthomas/kingpin/v2"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source/archive/pcplog"
)

func dumpCommand() command {
	return command{
		name: "dump",
		help: "Print every record of an archive (or of a directory's archives, in time order) as JSON lines, in file order: a record whose time goes back is printed too (libpcp skips it). At a corrupt or cut record, every line before it is written, then the error.",
		setup: func(cmd *kingpin.CmdClause) func() error {
			path := cmd.Arg("archive", "Archive: base name, any of its files, or a directory of archives (dumped in the order of their start).").Required().String()
			return func() error { return dumpArchive(os.Stdout, *path) }
		},
	}
}

// dumpArchive writes the records of the archive at path to w, one JSON object
// per line, in the form of the CLI contract.
func dumpArchive(w io.Writer, path string) error {
	as, err := pcplog.OpenAll([]string{path})
	if err != nil {
		return err
	}
	// a directory's archives in time order, as one timeline
	sort.SliceStable(as, func(i, j int) bool { return as[i].Label().Start.Before(as[j].Label().Start) })
	bw := bufio.NewWriterSize(w, 256<<10)
	for _, a := range as {
		err := dumpRecords(bw, a)
		a.Close()
		if err != nil {
			return err
		}
	}
	return bw.Flush()
}

// dumpRecords writes the records of a to bw.
func dumpRecords(bw *bufio.Writer, a *pcplog.Archive) error {
	r := a.Records()
	defer r.Close()
	js := &jsonLines{name: func(_ int, p semantics.PMID) string { return a.Name(p) }, records: true, names: map[semantics.PMID][]byte{}}
	var line []byte
	for r.Next() {
		rec := r.Record()
		line = js.append(line[:0], rec.Time, rec.Mark, rec.Sets)
		if _, err := bw.Write(line); err != nil {
			return err
		}
	}
	// what was read before an error goes out first, whole lines only
	ferr := bw.Flush()
	if err := r.Err(); err != nil {
		return err
	}
	if ferr != nil {
		return ferr
	}
	// a finished archive whose last record is cut short: everything
	// before it was written, then the error (pmdumplog's PM_ERR_LOGREC)
	return a.Truncated()
}
