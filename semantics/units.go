package semantics

// Units is a decoded pmUnits: dimensions and scales of space, time and count,
// plus the extra units of PCP 7.2 (temperature, voltage, current, power).
type Units struct {
	DimSpace, DimTime, DimCount int8
	ScaleSpace                  uint8 // 0 byte, 1 Kbyte ... 8 Ybyte (powers of 1024)
	ScaleTime                   uint8 // 0 nsec, 1 usec, 2 msec, 3 sec, 4 min, 5 hour
	ScaleCount                  int8  // power of 10
	ExtraUnit                   int8  // 7.2+: 1 temperature, 2 voltage, 3 current, 4 power; < 0 in the denominator
	ExtraScale                  uint8 // 7.2+
}

// Space scales (PM_SPACE_*).
const (
	SpaceByte uint8 = iota
	SpaceKByte
	SpaceMByte
	SpaceGByte
	SpaceTByte
	SpacePByte
	SpaceEByte
	SpaceZByte
	SpaceYByte
)

// Time scales (PM_TIME_*).
const (
	TimeNSec uint8 = iota
	TimeUSec
	TimeMSec
	TimeSec
	TimeMin
	TimeHour
)

func signed4(x uint32) int8 { return int8(uint8(x&0xf)<<4) >> 4 }

// UnitsFromWord decodes the packed 32-bit pmUnits word as stored (big-endian) in
// archive descriptors, and as the native word of an MMV file.
func UnitsFromWord(w uint32) Units {
	return Units{
		DimSpace:   signed4(w >> 28),
		DimTime:    signed4(w >> 24),
		DimCount:   signed4(w >> 20),
		ScaleSpace: uint8(w >> 16 & 0xf),
		ScaleTime:  uint8(w >> 12 & 0xf),
		ScaleCount: signed4(w >> 8),
		ExtraUnit:  int8(uint8(w>>3&0x1f)<<3) >> 3,
		ExtraScale: uint8(w & 0x7),
	}
}

// Word packs u into PCP's 32-bit pmUnits word.
func (u Units) Word() uint32 {
	return uint32(uint8(u.DimSpace)&0xf)<<28 |
		uint32(uint8(u.DimTime)&0xf)<<24 |
		uint32(uint8(u.DimCount)&0xf)<<20 |
		uint32(u.ScaleSpace&0xf)<<16 |
		uint32(u.ScaleTime&0xf)<<12 |
		uint32(uint8(u.ScaleCount)&0xf)<<8 |
		uint32(uint8(u.ExtraUnit)&0x1f)<<3 |
		uint32(u.ExtraScale&0x7)
}

// IsNone reports whether u has no dimension at all (PCP prints "" or "none").
func (u Units) IsNone() bool {
	return u.DimSpace == 0 && u.DimTime == 0 && u.DimCount == 0 && u.ExtraUnit == 0
}
