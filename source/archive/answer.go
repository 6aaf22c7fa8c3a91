package archive

import (
	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// answer fills res from the bounds of pms, the states of pmids' metrics
// (nil: not in the archives), at tReq: the availability check and the
// value choice of __pmLogFetchInterp, by rule. seenMark: the fetch read a
// <mark> that set a lower bound.
func answer(res *source.Result, pmids []semantics.PMID, pms []*pmState, rule semantics.InterpRule, tReq float64, seenMark bool) {
	if cap(res.Sets) < len(pmids) {
		sets := make([]source.ValueSet, len(pmids))
		copy(sets, res.Sets)
		res.Sets = sets
	}
	res.Sets = res.Sets[:len(pmids)]
	for i, p := range pmids {
		vs := &res.Sets[i]
		vs.PMID, vs.Err = p, nil
		if pms[i] == nil {
			vs.Err = semantics.ErrPMIDLog
			vs.Values = vs.Values[:0]
			continue
		}
		pms[i].answer(vs, rule, tReq, seenMark)
	}
}

// answer fills vs with the values of pm's instances in the result that
// are available at tReq, in libpcp's order, or with PM_ERR_TYPE for a
// counter of a type that cannot be one. It remembers how many for the
// next fetch (lastNumval: after a <mark>, a counter whose previous answer
// had values has none).
func (pm *pmState) answer(vs *source.ValueSet, rule semantics.InterpRule, tReq float64, seenMark bool) {
	vals := vs.Values[:0]
	d := pm.desc
	numval := pm.numval
	for _, c := range pm.order {
		if !c.inresult {
			continue
		}
		if d.Sem == semantics.SemDiscrete {
			if c.prior.Kind != semantics.BoundValue || c.prior.T > tReq {
				c.inresult = false
				numval--
				continue
			}
		} else {
			if c.prior.Kind != semantics.BoundValue || c.prior.T > tReq || c.next.Kind != semantics.BoundValue || c.next.T < tReq {
				c.inresult = false
				numval--
				continue
			}
			if d.Sem == semantics.SemCounter {
				if !d.Type.IsNumeric() {
					pm.typeErr = true
					continue
				}
				if seenMark && pm.lastNumval > 0 {
					c.inresult = false
					numval--
					continue
				}
			}
		}
		v, ok := interpolateAt(d, rule, &c.prior, &c.next, tReq)
		if !ok {
			continue
		}
		vals = append(vals, source.InstValue{Inst: c.inst, Value: v})
	}
	vs.Values = vals
	if pm.typeErr {
		vs.Err = semantics.ErrType
		vs.Values = vals[:0]
		pm.lastNumval = int(semantics.ErrType)
		return
	}
	pm.lastNumval = numval
}

// interpolateAt chooses the value of an instance that passed the
// availability check. Strings and aggregates are the prior bound's value as
// is, even when the next bound is at tReq (libpcp copies v_prior).
func interpolateAt(d semantics.Desc, rule semantics.InterpRule, prior, next *semantics.Bound, tReq float64) (semantics.Value, bool) {
	if !d.Type.IsNumeric() {
		if prior.T >= 0 && prior.Kind == semantics.BoundValue {
			return prior.V, true
		}
		return semantics.Value{}, false
	}
	return semantics.Interpolate(d.Type, d.Sem, rule, prior, next, tReq)
}
