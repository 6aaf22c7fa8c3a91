package pmcd

import (
	"time"

	"github.com/pcp-exporter/pcp-exporter/internal/pcpwire"
	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// resultDecoder decodes fetch replies into reused storage: after the first
// fetch of a metric set, decoding allocates nothing.
type resultDecoder struct {
	peer   string
	vals   []source.InstValue
	starts []int
	errs   pcpwire.Errors
	// limit bounds the values decoded in a fetch (0: none); cut counts
	// those left out by it.
	limit int
	cut   int
}

// decode appends the value sets of a RESULT or HIGHRES_RESULT reply to the
// fetch of pmids (whose INSITU values are of types) to sets, and returns
// the reply's timestamp. Values are stored in r.vals; call link once every
// reply of a fetch is decoded.
func (r *resultDecoder) decode(p pdu, pmids []semantics.PMID, types []semantics.Type, sets []source.ValueSet) ([]source.ValueSet, time.Time, error) {
	d := decoder(p)
	var ts time.Time
	var np, npAt int
	switch p.typ {
	case pduHighresResult:
		if len(p.b) < 32 {
			d.Fail(len(p.b), "truncated header: %d bytes", len(p.b))
		}
		npAt = d.Pos()
		np = int(d.I32())
		ts = time.Unix(d.I64(), d.I64())
	case pduResult:
		if len(p.b) < 24 {
			d.Fail(len(p.b), "truncated header: %d bytes", len(p.b))
		}
		ts = time.Unix(int64(d.I32()), int64(d.I32())*1000)
		npAt = d.Pos()
		np = int(d.I32())
	default:
		d.Fail(4, "not a fetch result")
	}
	if d.Err() == nil && np != len(pmids) {
		d.Fail(npAt, "numpmid %d for %d metrics asked for", np, len(pmids))
	}
	// pmcd's value blocks follow the sets, each after the one before
	bl := pcpwire.Blocks{Lo: 32, Ordered: true}
	var h pcpwire.ValueSet
	for i := 0; i < np && d.Err() == nil; i++ {
		at := d.Pos()
		d.ValueSet(&h, i, np)
		if d.Err() != nil {
			break
		}
		if h.PMID != pmids[i] {
			d.Fail(at, "value set %d is of %s, %s was asked for", i, h.PMID, pmids[i])
			break
		}
		r.starts = append(r.starts, len(r.vals))
		vs := source.ValueSet{PMID: h.PMID}
		if h.NumVal < 0 {
			vs.Err = r.errs.Of(h.NumVal)
		}
		if h.NumVal <= 0 {
			sets = append(sets, vs)
			continue
		}
		all := int(h.NumVal)
		nv := all
		if r.limit > 0 && len(r.vals)+nv > r.limit {
			nv = max(0, r.limit-len(r.vals))
			r.cut += all - nv
		}
		base := len(r.vals)
		if cap(r.vals)-base < nv {
			nvals := make([]source.InstValue, base, 2*cap(r.vals)+nv)
			copy(nvals, r.vals)
			r.vals = nvals
		}
		r.vals = r.vals[:base+nv]
		d.Values(r.vals[base:], &h, types[i], &bl)
		sets = append(sets, vs)
	}
	return sets, ts, wireErr(d.Err(), r.peer, p)
}

// link points each set at its values once all replies are decoded (r.vals
// may have moved while growing).
func (r *resultDecoder) link(sets []source.ValueSet) {
	for i := range sets {
		e := len(r.vals)
		if i+1 < len(r.starts) {
			e = r.starts[i+1]
		}
		sets[i].Values = r.vals[r.starts[i]:e:e]
	}
}

// reset empties the storage for the next fetch.
func (r *resultDecoder) reset() {
	r.vals = r.vals[:0]
	r.starts = r.starts[:0]
	r.cut = 0
}

// fetch sends HIGHRES_FETCH (FETCH for old pmcds) PDUs of at most pmcd's
// request size for pmids (whose INSITU values are of types) and decodes
// the replies into res, all within deadline: the replies are read into
// bufs and the values into rd, both reused from fetch to fetch. pmcd's
// change flags before each reply are handed to flag.
func (c *client) fetch(deadline time.Time, pmids []semantics.PMID, types []semantics.Type, rd *resultDecoder, bufs *[][]byte, res *source.Result, flag func(int32)) error {
	const chunk = (maxRequest - 28) / 4
	rd.reset()
	res.Sets = res.Sets[:0]
	c.c.SetDeadline(deadline)
	for k, lo := 0, 0; lo < len(pmids); k, lo = k+1, lo+chunk {
		hi := min(lo+chunk, len(pmids))
		if len(*bufs) <= k {
			*bufs = append(*bufs, nil)
		}
		p, code, flags, buf, err := c.fetchRequest(pmids[lo:hi], (*bufs)[k])
		(*bufs)[k] = retain(buf, &c.dropped)
		flag(flags)
		if err != nil {
			return err
		}
		if p.typ == pduError {
			// the whole request failed: every metric has the error
			e := rd.errs.Of(code)
			for _, id := range pmids[lo:hi] {
				rd.starts = append(rd.starts, len(rd.vals))
				res.Sets = append(res.Sets, source.ValueSet{PMID: id, Err: e})
			}
			continue
		}
		res.Sets, res.Time, err = rd.decode(p, pmids[lo:hi], types[lo:hi], res.Sets)
		if err != nil {
			return err
		}
	}
	rd.link(res.Sets)
	return nil
}

// fetchRequest sends one fetch of pmids (at most one request's worth) and
// reads its reply into buf: a RESULT, or an ERROR whose code is pmcd's
// error for the whole request. pmcd's change flags (ERROR PDUs with a positive code
// before the reply) are ORed into flags.
func (c *client) fetchRequest(pmids []semantics.PMID, buf []byte) (p pdu, code, flags int32, _ []byte, err error) {
	kind, reply := uint32(pduHighresFetch), uint32(pduHighresResult)
	if c.features&featHighres == 0 {
		kind, reply = pduFetch, pduResult
	}
	w := &c.w
	w.B = w.B[:0]
	w.Begin(kind)
	w.U32(0) // ctxid
	w.U32(0)
	w.U32(0)
	w.U32(uint32(len(pmids)))
	for _, id := range pmids {
		w.U32(uint32(id))
	}
	w.Finish()
	if _, err := c.c.Write(w.B); err != nil {
		return p, 0, flags, buf, c.ioErr(err)
	}
	for {
		p, buf, err = readPDU(c.reader(), buf, c.max, c.peer)
		if err != nil {
			return p, 0, flags, buf, c.ioErr(err)
		}
		if p.typ == pduError {
			code, err := errorCode(p, c.peer)
			if err != nil || code <= 0 {
				return p, code, flags, buf, err
			}
			flags |= code
			continue
		}
		if p.typ != reply {
			return p, 0, flags, buf, &FormatError{Peer: c.peer, PDU: pduName(p.typ), Offset: 4, Msg: "unexpected reply to " + pduName(kind)}
		}
		return p, 0, flags, buf, nil
	}
}

// fetchDeadline is the deadline of a fetch made while reading the
// metadata (deadline): bounded as a scrape's fetch is (Options.Timeout),
// not by the metadata's minute. pmcd answers a fetch within its own agent
// timeout (pmcd -t, 5 s by default) whatever its load; one that does not
// within the fetch timeout fails the scrapes' fetches just as well, so
// holding the metadata read (and the source down) for longer gains
// nothing: the read fails now and is tried again after the backoff.
func (c *client) fetchDeadline(deadline time.Time) time.Time {
	if c.fetchTimeout > 0 {
		if d := time.Now().Add(c.fetchTimeout); d.Before(deadline) {
			return d
		}
	}
	return deadline
}

// fetchOnce fetches a few pmids (whose INSITU values are of types) on c,
// outside the steady fetch path, within fetchDeadline(deadline).
func (c *client) fetchOnce(deadline time.Time, pmids []semantics.PMID, types []semantics.Type) ([]source.ValueSet, time.Time, int32, error) {
	c.c.SetDeadline(c.fetchDeadline(deadline))
	p, code, flags, buf, err := c.fetchRequest(pmids, nil)
	retain(buf, &c.dropped)
	if err != nil {
		return nil, time.Time{}, flags, err
	}
	if p.typ == pduError {
		return nil, time.Time{}, flags, pmErr(code)
	}
	rd := resultDecoder{peer: c.peer, limit: c.limit}
	sets, at, err := rd.decode(p, pmids, types, nil)
	if err == nil {
		rd.link(sets)
	}
	return sets, at, flags, err
}
