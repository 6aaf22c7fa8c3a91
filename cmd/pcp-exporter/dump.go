package main

import (
	"bufio"
	"io"
	"os"
	"sort"

	"github.com/alecthomas/kingpin/v2"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source/archive"
)

func init() {
	addCommand(command{
		name: "dump",
		help: "Print every record of an archive (or of a directory's archives) as JSON lines.",
		setup: func(cmd *kingpin.CmdClause) func() error {
			path := cmd.Arg("archive", "Archive: base name, any of its files, or a directory of archives (dumped in the order of their start).").Required().String()
			return func() error { return dumpArchive(os.Stdout, *path) }
		},
	})
}

// dumpArchive writes the records of the archive at path to w, one JSON object
// per line, in the form of the CLI contract.
func dumpArchive(w io.Writer, path string) error {
	as, err := archive.OpenAll([]string{path})
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
func dumpRecords(bw *bufio.Writer, a *archive.Archive) error {
	r := a.Records()
	defer r.Close()
	names := map[semantics.PMID][]byte{}
	var line []byte
	for r.Next() {
		rec := r.Record()
		line = appendRecordJSON(line[:0], rec, func(p semantics.PMID) []byte {
			n, ok := names[p]
			if !ok {
				n = semantics.AppendJSONString(nil, a.Name(p))
				names[p] = n
			}
			return n
		})
		if _, err := bw.Write(line); err != nil {
			return err
		}
	}
	return r.Err()
}

func appendRecordJSON(b []byte, rec *archive.Record, name func(semantics.PMID) []byte) []byte {
	b = append(b, `{"time":"`...)
	b = semantics.AppendTime(b, rec.Time)
	b = append(b, `","mark":`...)
	if rec.Mark {
		b = append(b, "true"...)
	} else {
		b = append(b, "false"...)
	}
	b = append(b, `,"metrics":[`...)
	for i, s := range rec.Sets {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"pmid":"`...)
		b = appendPMID(b, s.PMID)
		b = append(b, `","name":`...)
		b = append(b, name(s.PMID)...)
		if s.Err != nil {
			b = append(b, `,"error":`...)
			b = semantics.AppendJSONString(b, s.Err.Error())
			b = append(b, '}')
			continue
		}
		b = append(b, `,"values":[`...)
		for j, v := range s.Values {
			if j > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"inst":`...)
			if v.Inst == semantics.InNull {
				b = append(b, "null"...)
			} else {
				b = appendInt(b, int64(v.Inst))
			}
			b = append(b, `,"value":`...)
			b = semantics.AppendJSON(b, v.Value)
			b = append(b, '}')
		}
		b = append(b, "]}"...)
	}
	return append(b, "]}\n"...)
}

func appendInt(b []byte, v int64) []byte {
	if v < 0 {
		b = append(b, '-')
		return appendUint(b, uint64(-v))
	}
	return appendUint(b, uint64(v))
}

func appendUint(b []byte, v uint64) []byte {
	var tmp [20]byte
	i := len(tmp)
	for {
		i--
		tmp[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			break
		}
	}
	return append(b, tmp[i:]...)
}

func appendPMID(b []byte, p semantics.PMID) []byte {
	b = appendUint(b, uint64(p.Domain()))
	b = append(b, '.')
	b = appendUint(b, uint64(p.Cluster()))
	b = append(b, '.')
	return appendUint(b, uint64(p.Item()))
}
