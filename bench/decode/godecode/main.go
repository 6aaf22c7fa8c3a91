// Command godecode is the Go side of the decode benchmark (bench/decode):
// it reads every record of an archive with source/archive and prints the
// counts the C peer (fetcharchive.c, libpcp's pmFetchArchive loop) prints,
// touching every value, or with extract=1 converting every numeric value to
// float64 as pmExtractValue to PM_TYPE_DOUBLE does.
//
// usage: godecode ARCHIVE [extract=1]
package main

import (
	"fmt"
	"os"
	"time"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source/archive/pcplog"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: godecode ARCHIVE [extract]")
		os.Exit(2)
	}
	extract := len(os.Args) < 3 || os.Args[2] != "0"
	start := time.Now()
	a, err := pcplog.Open(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	r := a.Records()
	var recs, vals int64
	var sum float64
	var bits uint64
	for r.Next() {
		rec := r.Record()
		recs++
		for i := range rec.Sets {
			s := &rec.Sets[i]
			vals += int64(len(s.Values))
			if !extract {
				for j := range s.Values {
					bits += s.Values[j].Value.Bits()
				}
				continue
			}
			for j := range s.Values {
				v := s.Values[j].Value
				if v.Type().IsNumeric() {
					sum += v.Float64()
				}
			}
		}
	}
	if err := r.Err(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	_ = semantics.InNull
	fmt.Printf("records %d values %d (sum %g) %.3f s\n", recs, vals, sum, time.Since(start).Seconds())
	_ = bits
}
