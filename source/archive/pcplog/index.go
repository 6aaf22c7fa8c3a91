package pcplog

import (
	"encoding/binary"
	"time"
)

// IndexEntry is one entry of the temporal index (.index): at Time, the data
// record of that time starts at DataOff in volume Vol, and the metadata
// written for it at MetaOff in .meta.
type IndexEntry struct {
	Time    time.Time
	Vol     int32
	MetaOff int64
	DataOff int64
}

// IndexEntrySize is the size of an index entry of version v.
func IndexEntrySize(v int) int {
	if v == 3 {
		return 32
	}
	return 20
}

// ParseIndex decodes the entries after the label; a short trailing entry is
// ignored (treated as the end). It returns the bytes consumed.
func ParseIndex(b []byte, v int) ([]IndexEntry, int) {
	sz := IndexEntrySize(v)
	n := len(b) / sz
	out := make([]IndexEntry, 0, n)
	for i := 0; i < n; i++ {
		e := b[i*sz:]
		var ie IndexEntry
		if v == 3 {
			ie.Time = TimeV3(e)
			ie.Vol = int32(be32(e[12:]))
			ie.MetaOff = int64(binary.BigEndian.Uint64(e[16:]))
			ie.DataOff = int64(binary.BigEndian.Uint64(e[24:]))
		} else {
			ie.Time = TimeV2(e)
			ie.Vol = int32(be32(e[8:]))
			ie.MetaOff = int64(int32(be32(e[12:])))
			ie.DataOff = int64(int32(be32(e[16:])))
		}
		out = append(out, ie)
	}
	return out, n * sz
}
