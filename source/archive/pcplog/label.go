package pcplog

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"
)

// Archive magic and label sizes (PM_LOG_MAGIC, __pmLabel_v2/v3), the
// volume numbers of the .meta and .index files in their labels, and the
// bound on a record's length.
const (
	Magic         = 0x50052600
	LabelLenV2    = 132
	LabelLenV3    = 808
	FeatureQA     = 1 << 31
	VolMeta       = -1
	VolIndex      = -2
	MaxRecordSize = 1 << 31
)

// Label is the label record at the start of every file of an archive.
type Label struct {
	Version  int   // 2 or 3
	PID      int32 // process id of the writer
	Start    time.Time
	Vol      int32  // volume number, -1 for .meta, -2 for .index
	Features uint32 // v3 feature bits
	Hostname string
	Timezone string
	Zoneinfo string // v3 only
}

// LabelSize returns the size of the label record of version v.
func LabelSize(v int) int {
	if v == 3 {
		return LabelLenV3
	}
	return LabelLenV2
}

// cstr is b up to its first NUL byte.
func cstr(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// TimeV3 decodes a v3 __pmTimestamp: seconds as two BE words, low word first.
func TimeV3(b []byte) time.Time {
	sec := uint64(be32(b[4:]))<<32 | uint64(be32(b))
	return time.Unix(int64(sec), int64(be32(b[8:])))
}

// TimeV2 decodes a v2 pmTimeval (sec, usec).
func TimeV2(b []byte) time.Time {
	return time.Unix(int64(int32(be32(b))), int64(int32(be32(b[4:])))*1000)
}

// be32 decodes a big-endian 32-bit word.
func be32(b []byte) uint32 { return binary.BigEndian.Uint32(b) }

// ParseLabel decodes a label record; b holds at least the record. file names
// the file for errors.
func ParseLabel(file string, b []byte) (Label, error) {
	ferr := func(off int, format string, args ...any) (Label, error) {
		return Label{}, &FormatError{File: file, Off: int64(off), Msg: "label: " + fmt.Sprintf(format, args...)}
	}
	if len(b) < 8 {
		return ferr(0, "file too short for a label (%d bytes)", len(b))
	}
	n := int(be32(b))
	magic := be32(b[4:])
	if magic&0xffffff00 != Magic {
		return ferr(4, "bad magic 0x%08x, not a PCP archive", magic)
	}
	v := int(magic & 0xff)
	if v != 2 && v != 3 {
		return ferr(4, "unsupported archive version %d", v)
	}
	if n != LabelSize(v) {
		return ferr(0, "length %d, want %d for a v%d label", n, LabelSize(v), v)
	}
	if len(b) < n {
		return ferr(len(b), "truncated label (%d of %d bytes)", len(b), n)
	}
	if t := int(be32(b[n-4:])); t != n {
		return ferr(n-4, "trailer length %d != header %d", t, n)
	}
	l := Label{Version: v, PID: int32(be32(b[8:]))}
	if v == 2 {
		l.Start = TimeV2(b[12:])
		l.Vol = int32(be32(b[20:]))
		l.Hostname = cstr(b[24:88])
		l.Timezone = cstr(b[88:128])
	} else {
		l.Start = TimeV3(b[12:])
		l.Vol = int32(be32(b[24:]))
		l.Features = be32(b[28:])
		l.Hostname = cstr(b[36:292])
		l.Timezone = cstr(b[292:548])
		l.Zoneinfo = cstr(b[548:804])
		if l.Features&^FeatureQA != 0 {
			return ferr(28, "unsupported archive features 0x%08x", l.Features)
		}
	}
	return l, nil
}
