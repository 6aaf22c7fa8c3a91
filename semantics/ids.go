package semantics

import "strconv"

// PMID is a PCP metric identifier: flag (bit 31), domain (bits 30-22),
// cluster (bits 21-10) and item (bits 9-0).
type PMID uint32

// InDom is a PCP instance-domain identifier: flag (bit 31), domain (bits 30-22)
// and serial (bits 21-0).
type InDom uint32

const (
	// PMIDNull is PM_ID_NULL.
	PMIDNull PMID = 0xffffffff
	// InDomNull is PM_INDOM_NULL: the metric is singular.
	InDomNull InDom = 0xffffffff
	// InNull is PM_IN_NULL, the instance id of a singular metric's value.
	InNull int32 = -1
)

// NewPMID builds a PMID from its parts (pmID_build).
func NewPMID(domain, cluster, item uint32) PMID {
	return PMID((domain&0x1ff)<<22 | (cluster&0xfff)<<10 | item&0x3ff)
}

// Domain returns the PMDA domain number.
func (p PMID) Domain() uint32 { return uint32(p) >> 22 & 0x1ff }

// Cluster returns the cluster number.
func (p PMID) Cluster() uint32 { return uint32(p) >> 10 & 0xfff }

// Item returns the item number.
func (p PMID) Item() uint32 { return uint32(p) & 0x3ff }

// String returns PCP's dotted form, "60.0.1", or "PM_ID_NULL".
func (p PMID) String() string {
	if p == PMIDNull {
		return "PM_ID_NULL"
	}
	b := make([]byte, 0, 16)
	b = strconv.AppendUint(b, uint64(p.Domain()), 10)
	b = append(b, '.')
	b = strconv.AppendUint(b, uint64(p.Cluster()), 10)
	b = append(b, '.')
	b = strconv.AppendUint(b, uint64(p.Item()), 10)
	return string(b)
}

// NewInDom builds an InDom from its parts (pmInDom_build).
func NewInDom(domain, serial uint32) InDom {
	return InDom((domain&0x1ff)<<22 | serial&0x3fffff)
}

// Domain returns the PMDA domain number.
func (i InDom) Domain() uint32 { return uint32(i) >> 22 & 0x1ff }

// Serial returns the serial number within the domain.
func (i InDom) Serial() uint32 { return uint32(i) & 0x3fffff }

// String returns PCP's dotted form, "60.1", or "PM_INDOM_NULL".
func (i InDom) String() string {
	if i == InDomNull {
		return "PM_INDOM_NULL"
	}
	return strconv.FormatUint(uint64(i.Domain()), 10) + "." + strconv.FormatUint(uint64(i.Serial()), 10)
}
