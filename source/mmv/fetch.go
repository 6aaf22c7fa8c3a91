package mmv

import (
	"math"
	"slices"
	"time"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// errGeneric is PM_ERR_GENERIC, pmdammv's answer for a string value whose
// slot lies outside the file.
const errGeneric = semantics.PMError(-12345)

// fetchAttempts bounds the retries when a file changes generation while its
// values are read.
const fetchAttempts = 8

// current reports whether every file of the view still holds the generation
// the view was built from.
func (v *view) current() bool {
	for _, f := range v.files {
		if !f.mapping.current() {
			return false
		}
	}
	return true
}

// prepare sizes res for n value sets, keeping the slices (and string
// buffers) of earlier fetches.
func prepare(res *source.Result, n int) {
	if cap(res.Sets) < n {
		sets := make([]source.ValueSet, n)
		copy(sets, res.Sets[:cap(res.Sets)])
		res.Sets = sets
	}
	res.Sets = res.Sets[:n]
}

// fill reads the values of pmids into res. It returns false when a file
// changed generation before or during the read: the caller reloads and
// retries, so a rewritten file never yields torn or mixed values.
func (v *view) fill(pmids []semantics.PMID, res *source.Result, now time.Time) bool {
	if !v.current() {
		return false
	}
	nowUsec := now.Unix()*1e6 + int64(now.Nanosecond()/1e3)
	for i, id := range pmids {
		set := &res.Sets[i]
		set.PMID = id
		set.Err = nil
		m := v.byPMID[id]
		if m == nil {
			set.Err = semantics.ErrPMID
			set.Values = set.Values[:0]
			continue
		}
		set.Values, set.Err = m.read(set.Values[:0], nowUsec)
	}
	return v.current()
}

// read appends the current values of m to vals, reusing the byte buffers of
// the STRING values previously held in vals' backing array.
func (m *metric) read(vals []source.InstValue, nowUsec int64) ([]source.InstValue, error) {
	data := m.file.data
	sentinel := m.file.hdr.flags&FlagSentinel != 0
	if !sentinel && m.mtype != TypeString && m.mtype != TypeElapsed {
		return m.readNumbers(vals, data), nil
	}
	for _, r := range m.vals {
		e := data[r.off : r.off+valueSize : r.off+valueSize]
		raw := ne.Uint64(e)
		var val semantics.Value
		switch m.mtype {
		case TypeI32:
			if sentinel && raw == math.MaxUint64 {
				continue
			}
			val = semantics.Int32Value(int32(ne.Uint32(e)))
		case TypeU32:
			if sentinel && raw == math.MaxUint64 {
				continue
			}
			val = semantics.Uint32Value(ne.Uint32(e))
		case TypeI64:
			if sentinel && raw == math.MaxUint64 {
				continue
			}
			val = semantics.Int64Value(int64(raw))
		case TypeU64:
			if sentinel && raw == math.MaxUint64 {
				continue
			}
			val = semantics.Uint64Value(raw)
		case TypeFloat:
			// pmdammv 6.0.3 compares the value with NaN using ==, which is
			// never true: a NaN sentinel is exported as NaN, and so here.
			val = semantics.FloatValue(math.Float32frombits(ne.Uint32(e)))
		case TypeDouble:
			val = semantics.DoubleValue(math.Float64frombits(raw))
		case TypeElapsed:
			if sentinel && raw == math.MaxUint64 {
				continue
			}
			ll := int64(raw)
			if extra := int64(ne.Uint64(e[8:])); extra < 0 { // interval in progress
				ll += nowUsec + extra
			}
			val = semantics.Int64Value(ll)
		case TypeString:
			p, ok := cstr(data, ne.Uint64(e[8:]), StringMax)
			if !ok {
				return vals[:0], errGeneric
			}
			if sentinel && len(p) == 0 {
				continue
			}
			var buf []byte
			if len(vals) < cap(vals) {
				buf = vals[:len(vals)+1][len(vals)].Value.Bytes()[:0]
			}
			buf = append(buf, p...)
			val = semantics.BytesValue(semantics.TypeString, buf)
		}
		vals = append(vals, source.InstValue{Inst: r.inst, Value: val})
	}
	return vals, nil
}

// readNumbers is read for the numeric types of a file without sentinels
// (every value present): one loop per type over a slice sized up front.
func (m *metric) readNumbers(vals []source.InstValue, data []byte) []source.InstValue {
	n := len(vals)
	vals = slices.Grow(vals, len(m.vals))[:n+len(m.vals)]
	out := vals[n:]
	refs := m.vals[:len(out)]
	switch m.mtype {
	case TypeI32:
		for i, r := range refs {
			out[i] = source.InstValue{Inst: r.inst, Value: semantics.Int32Value(int32(ne.Uint32(data[r.off : r.off+4])))}
		}
	case TypeU32:
		for i, r := range refs {
			out[i] = source.InstValue{Inst: r.inst, Value: semantics.Uint32Value(ne.Uint32(data[r.off : r.off+4]))}
		}
	case TypeI64:
		for i, r := range refs {
			out[i] = source.InstValue{Inst: r.inst, Value: semantics.Int64Value(int64(ne.Uint64(data[r.off : r.off+8])))}
		}
	case TypeU64:
		for i, r := range refs {
			out[i] = source.InstValue{Inst: r.inst, Value: semantics.Uint64Value(ne.Uint64(data[r.off : r.off+8]))}
		}
	case TypeFloat:
		for i, r := range refs {
			out[i] = source.InstValue{Inst: r.inst, Value: semantics.FloatValue(math.Float32frombits(ne.Uint32(data[r.off : r.off+4])))}
		}
	case TypeDouble:
		for i, r := range refs {
			out[i] = source.InstValue{Inst: r.inst, Value: semantics.DoubleValue(math.Float64frombits(ne.Uint64(data[r.off : r.off+8])))}
		}
	default: // not reached: read takes the other types
		return vals[:n]
	}
	return vals
}

// metricsOf lists the metadata of a view.
func (v *view) metricList() []source.Metric {
	out := make([]source.Metric, len(v.metrics))
	for i, m := range v.metrics {
		out[i] = m.Metric
	}
	return out
}

func (v *view) instances(id semantics.InDom) []source.Instance {
	in := v.indoms[id]
	if in == nil {
		return nil
	}
	return slices.Clone(in.insts)
}
