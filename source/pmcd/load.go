package pmcd

import (
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// What a metadata read does depends on what pmcd flagged (see flag): an
// agent or hostname change reads everything again; a label change alone
// reads only the labels; a namespace change alone (pmdammv raises one
// whenever any process's MMV file appears or goes) first reads only the
// namespace and the PMIDs of the selected names, and reads the
// descriptors, help, labels and instances only of the metrics new to the
// selection, dropping those gone: nothing more when the selection is
// unchanged.

// loadKind is what a metadata read did.
type loadKind uint8

const (
	loadAll       loadKind = iota // everything read
	loadLabels                    // only the labels read again
	loadUnchanged                 // the selected names checked: unchanged
	loadNew                       // the selected names changed: the new ones read
)

// loadCounts counts the metadata reads by kind, and the descriptor reads.
type loadCounts struct {
	all, labels, unchanged, changed uint64
	// descs counts the reads that asked pmcd for descriptors.
	descs uint64
}

func (n *loadCounts) add(k loadKind) {
	switch k {
	case loadAll:
		n.all++
		n.descs++
	case loadLabels:
		n.labels++
	case loadUnchanged:
		n.unchanged++
	case loadNew:
		n.changed++
		n.descs++
	}
}

// load reads the metadata of the selected metrics on c (not yet the
// source's: s.mu is not held): everything when prev is nil, else what pmcd
// flagged as changed since prev (staleLabels, staleNames or both). It
// returns prev itself when the names were checked and nothing changed.
func (s *Source) load(c *client, deadline time.Time, prev *metadata, what staleness) (*metadata, loadKind, error) {
	if prev == nil {
		md, err := s.readAll(c, deadline, nil, nil)
		return md, loadAll, err
	}
	if what&staleNames == 0 {
		md, err := s.readLabels(c, deadline, prev)
		return md, loadLabels, err
	}
	names, ids, err := s.readSelected(c, deadline)
	if err != nil {
		return nil, 0, err
	}
	same := slices.Equal(names, prev.names) && slices.Equal(ids, prev.ids)
	switch {
	case same && what&staleLabels != 0:
		md, err := s.readLabels(c, deadline, prev)
		return md, loadLabels, err
	case same:
		return prev, loadUnchanged, nil
	case what&staleLabels != 0:
		// the kept metrics' labels are to be read again too: all of it
		md, err := s.readAll(c, deadline, names, ids)
		return md, loadAll, err
	}
	md, err := s.readNew(c, deadline, prev, names, ids)
	return md, loadNew, err
}

// readSelected traverses the namespace and looks up the PMIDs of the
// selected names (in name order; PM_ID_NULL for those pmcd has none of).
func (s *Source) readSelected(c *client, deadline time.Time) ([]string, []semantics.PMID, error) {
	all, err := c.readNames(deadline)
	if err != nil {
		return nil, nil, err
	}
	var names []string
	for _, n := range all {
		if s.opts.Selection.Selected(n) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	ids, err := c.lookupNames(deadline, names)
	if err != nil {
		return nil, nil, err
	}
	return names, ids, nil
}

// readAll reads all the metadata of the selected metrics: names and ids
// when they were not read already.
func (s *Source) readAll(c *client, deadline time.Time, names []string, ids []semantics.PMID) (*metadata, error) {
	if names == nil {
		var err error
		if names, ids, err = s.readSelected(c, deadline); err != nil {
			return nil, err
		}
	}
	md := newMetadata(names, ids)
	var uniq []semantics.PMID
	seen := map[semantics.PMID]bool{}
	for _, id := range ids {
		if id != semantics.PMIDNull && !seen[id] {
			seen[id] = true
			uniq = append(uniq, id)
		}
	}
	descs, err := c.lookupDescs(deadline, uniq)
	if err != nil {
		return nil, err
	}
	for _, d := range descs {
		if d != nil {
			md.descs[d.PMID] = d
		}
	}
	oneline, help := map[semantics.PMID]string{}, map[semantics.PMID]string{}
	labels := map[request]semantics.LabelSet{}
	if err := c.readDetails(deadline, descs, false, &details{md: md, oneline: oneline, help: help, labels: labels}); err != nil {
		return nil, err
	}
	md.context = labels[contextLabels]
	s.assemble(md, oneline, help, labels, nil)
	if md.unresolved > 0 {
		s.log.Info("pmcd metrics without a PMID or descriptor skipped", "pmcd", s.ep.String(), "count", md.unresolved)
	}
	return md, nil
}

// readLabels reads only the labels of prev's metrics and instances again:
// the names, descriptors, help and instances are prev's.
func (s *Source) readLabels(c *client, deadline time.Time, prev *metadata) (*metadata, error) {
	md := newMetadata(prev.names, prev.ids)
	oneline, help := map[semantics.PMID]string{}, map[semantics.PMID]string{}
	for _, m := range prev.metrics {
		oneline[m.Desc.PMID], help[m.Desc.PMID] = m.OneLine, m.Help
	}
	descs := make([]*semantics.Desc, 0, len(prev.descs))
	for id, d := range prev.descs {
		md.descs[id] = d
		descs = append(descs, d)
	}
	for id, in := range prev.indoms {
		// a copy: scrapes may be reading prev's instances
		md.indoms[id] = &indom{insts: slices.Clone(in.insts)}
	}
	labels := map[request]semantics.LabelSet{}
	if err := c.readDetails(deadline, descs, true, &details{md: md, oneline: oneline, help: help, labels: labels}); err != nil {
		return nil, err
	}
	md.context = labels[contextLabels]
	s.assemble(md, oneline, help, labels, nil)
	return md, nil
}

// readNew reads the metadata of the metrics of names (with their ids)
// that prev has no descriptor of, keeping prev's for the others and
// dropping prev's metrics no longer selected.
func (s *Source) readNew(c *client, deadline time.Time, prev *metadata, names []string, ids []semantics.PMID) (*metadata, error) {
	md := newMetadata(names, ids)
	md.context = prev.context
	md.malformed, md.why = maps.Clone(prev.malformed), prev.why
	var fresh []semantics.PMID
	for _, id := range ids {
		if id == semantics.PMIDNull || md.descs[id] != nil || slices.Contains(fresh, id) {
			continue
		}
		if d := prev.descs[id]; d != nil {
			md.descs[id] = d
			if in := prev.indoms[d.InDom]; in != nil && md.indoms[d.InDom] == nil {
				md.indoms[d.InDom] = &indom{insts: slices.Clone(in.insts)}
			}
			continue
		}
		fresh = append(fresh, id)
	}
	oneline, help := map[semantics.PMID]string{}, map[semantics.PMID]string{}
	labels := map[request]semantics.LabelSet{}
	if len(fresh) > 0 {
		descs, err := c.lookupDescs(deadline, fresh)
		if err != nil {
			return nil, err
		}
		for _, d := range descs {
			if d != nil {
				md.descs[d.PMID] = d
			}
		}
		if err := c.readDetails(deadline, descs, false, &details{md: md, oneline: oneline, help: help, labels: labels}); err != nil {
			return nil, err
		}
		if ls, ok := labels[contextLabels]; ok {
			md.context = ls
		}
	}
	kept := make(map[semantics.PMID]*source.Metric, len(prev.metrics))
	for i := range prev.metrics {
		kept[prev.metrics[i].Desc.PMID] = &prev.metrics[i]
	}
	s.assemble(md, oneline, help, labels, kept)
	return md, nil
}

func newMetadata(names []string, ids []semantics.PMID) *metadata {
	return &metadata{names: names, ids: ids, descs: map[semantics.PMID]*semantics.Desc{}, indoms: map[semantics.InDom]*indom{}}
}

// contextLabels is the request of the context's labels.
var contextLabels = request{kind: pduLabelReq, sub: labelContext, ident: 0xffffffff}

// assemble lists md's metrics, one per resolved name, with their help and
// their labels merged (context, domain, instance domain, cluster, item);
// a metric of kept (by PMID) keeps its help and labels.
func (s *Source) assemble(md *metadata, oneline, help map[semantics.PMID]string, labels map[request]semantics.LabelSet, kept map[semantics.PMID]*source.Metric) {
	merged := map[semantics.PMID]semantics.LabelSet{}
	lab := func(sub, ident uint32) semantics.LabelSet {
		return labels[request{kind: pduLabelReq, sub: sub, ident: ident}]
	}
	for i, n := range md.names {
		d := md.descs[md.ids[i]]
		if d == nil {
			md.unresolved++
			continue
		}
		if m := kept[d.PMID]; m != nil {
			md.metrics = append(md.metrics, source.Metric{Name: n, Desc: *d, OneLine: m.OneLine, Help: m.Help, Labels: m.Labels})
			continue
		}
		ls, ok := merged[d.PMID]
		if !ok {
			var in semantics.LabelSet
			if d.InDom != semantics.InDomNull {
				in = lab(labelInDom, uint32(d.InDom))
			}
			ctx := md.context
			if s.opts.ContextApart {
				ctx = nil // ContextLabels has them
			}
			ls = semantics.MergeLabels(ctx, lab(labelDomain, d.PMID.Domain()), in,
				lab(labelCluster, uint32(semantics.NewPMID(d.PMID.Domain(), d.PMID.Cluster(), 0))), lab(labelItem, uint32(d.PMID)))
			merged[d.PMID] = ls
		}
		md.metrics = append(md.metrics, source.Metric{Name: n, Desc: *d, OneLine: oneline[d.PMID], Help: help[d.PMID], Labels: ls})
	}
	share(md)
}
