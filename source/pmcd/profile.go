package pmcd

import (
	"time"

	"github.com/pcp-exporter/pcp-exporter/semantics"
)

// pmcd (6.0.3 and every later version read, up to 7.2) can crash on a
// request for an instance domain's instance labels (LABEL_REQ with
// PM_LABEL_INSTANCES) answered by an agent running as a DSO inside pmcd
// (linux, pmcd, mmv, ... in Debian's default configuration): libpcp_pmda's
// pmdaLabel walks the instances through __pmdaNextInst, which checks each
// against the last instance profile pmcd handed the agent (pmdaExt.e_prof).
// pmcd hands a client's profile to a DSO only before a fetch (dofetch.c),
// and frees it when that client goes (DeleteClient), leaving the agent's
// pointer dangling: the next instance-labels request of any client reads
// freed memory, and pmcd dies with SIGSEGV when glibc reused it (a client
// that fetched hinv.ncpu and left is enough; so is a client dropped while
// its fetch was pending). See docs/libpcp-differences.md.
//
// A fetch of one metric of the agent on this connection makes pmcd hand
// the agent this connection's profile, alive as long as the connection is.
// So instance labels are only ever asked right after a fetch of a metric of
// the agent on the same connection: primeAgents before a metadata read's
// label requests; the steady path asks them right after a scrape's fetch.

// primeAgents fetches, on c, one metric of each domain of indoms (from
// descs, a metric without an instance domain preferred: usually the
// cheapest), so that each agent's profile is c's. pmcd's change flags seen
// meanwhile are returned.
func (c *client) primeAgents(deadline time.Time, descs []*semantics.Desc, indoms []semantics.InDom) (int32, error) {
	var pmids []semantics.PMID
	var doms []uint32
	for _, in := range indoms {
		dom := in.Domain()
		seen := false
		for _, d := range doms {
			seen = seen || d == dom
		}
		if seen {
			continue
		}
		var pick *semantics.Desc
		for _, d := range descs {
			if d != nil && d.PMID.Domain() == dom && (pick == nil || pick.InDom != semantics.InDomNull && d.InDom == semantics.InDomNull) {
				pick = d
			}
		}
		if pick != nil {
			doms = append(doms, dom)
			pmids = append(pmids, pick.PMID)
		}
	}
	if len(pmids) == 0 {
		return 0, nil
	}
	c.c.SetDeadline(c.fetchDeadline(deadline))
	// per-metric errors are fine: pmcd hands the profile to the agent
	// before asking it for values (a whole request refused, as for a
	// client denied fetches, is refused before any label request too)
	_, _, flags, buf, err := c.fetchRequest(pmids, nil)
	retain(buf, &c.dropped)
	return flags, err
}
