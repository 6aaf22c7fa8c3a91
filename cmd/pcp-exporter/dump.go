package main

import (
	"bufio"
	"io"
	"os"

	"github.com/alecthomas/kingpin/v2"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source/archive"
)

func dumpCommand() command {
	return command{
		name: "dump",
		help: "Print every record of an archive as JSON lines.",
		setup: func(cmd *kingpin.CmdClause) func() error {
			path := cmd.Arg("archive", "Archive: base name or any of its files.").Required().String()
			return func() error { return dumpArchive(os.Stdout, *path) }
		},
	}
}

// dumpArchive writes the records of the archive at path to w, one JSON object
// per line, in the form of the CLI contract.
func dumpArchive(w io.Writer, path string) error {
	a, err := archive.Open(path)
	if err != nil {
		return err
	}
	defer a.Close()
	bw := bufio.NewWriterSize(w, 256<<10)
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
	if err := r.Err(); err != nil {
		return err
	}
	return bw.Flush()
}
