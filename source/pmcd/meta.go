package pmcd

import (
	"cmp"
	"fmt"
	"slices"
	"sort"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// metadata is everything read from pmcd about the selected metrics: read
// once per connection and again when pmcd flags a change.
type metadata struct {
	names   []string         // the selected names, in order
	ids     []semantics.PMID // their PMIDs (PM_ID_NULL: none)
	metrics []source.Metric  // selected, resolved metrics in name order
	descs   map[semantics.PMID]*semantics.Desc
	indoms  map[semantics.InDom]*indom
	context semantics.LabelSet
	// shared holds the skeleton whose names, ids, metrics and descs
	// these are (shared.go): they are never modified.
	shared *skeleton
	// unresolved counts selected names pmcd gave no PMID or descriptor for.
	unresolved int
	// malformed counts the labels left out as malformed, by the label
	// request (type and ident) that got them; why is an example.
	malformed map[[2]uint32]int
	why       string
}

// noteMalformed records how many labels the answer to the label request
// of sub and ident left out as malformed (sets, all of that answer).
func (md *metadata) noteMalformed(sub, ident uint32, sets []labelSet) {
	n := 0
	for _, ls := range sets {
		if ls.bad > 0 && n == 0 {
			md.why = labelsOf(sub, ident, ls.inst) + ": " + ls.why
		}
		n += ls.bad
	}
	key := [2]uint32{sub, ident}
	if n == 0 {
		delete(md.malformed, key)
		return
	}
	if md.malformed == nil {
		md.malformed = map[[2]uint32]int{}
	}
	md.malformed[key] = n
}

// labelsOf names the labels of a label request's set.
func labelsOf(sub, ident uint32, inst int32) string {
	switch sub {
	case labelContext:
		return "the context's labels"
	case labelDomain:
		return fmt.Sprintf("the labels of domain %d", ident)
	case labelInDom:
		return "the labels of instance domain " + semantics.InDom(ident).String()
	case labelCluster:
		id := semantics.PMID(ident)
		return fmt.Sprintf("the labels of cluster %d.%d", id.Domain(), id.Cluster())
	case labelItem:
		return "the labels of metric " + semantics.PMID(ident).String()
	}
	return fmt.Sprintf("the labels of instance %d of instance domain %s", inst, semantics.InDom(ident))
}

// malformedLabels is how many labels md left out as malformed.
func (md *metadata) malformedLabels() int {
	n := 0
	for _, v := range md.malformed {
		n += v
	}
	return n
}

// indom is an instance domain's instances in id order, and an index of
// their ids.
type indom struct {
	insts []source.Instance // in id order
	// cut counts the instances left out by the series limit.
	cut int
}

// has says whether the instance domain has instance id (a binary search:
// a map per instance domain cost a fleet's pooled targets more than their
// instances).
func (in *indom) has(id int32) bool {
	_, ok := slices.BinarySearchFunc(in.insts, id, func(i source.Instance, id int32) int { return cmp.Compare(i.ID, id) })
	return ok
}

const (
	labelContext   = 0x01
	labelDomain    = 0x02
	labelInDom     = 0x04
	labelCluster   = 0x08
	labelItem      = 0x10
	labelInstances = 0x20
)

const (
	textOneLine = 1
	textHelp    = 2
	textPMID    = 4
)

// setInstances records an instance domain's instances (sorted by id) with
// their labels when known.
func (md *metadata) setInstances(id semantics.InDom, insts []source.Instance, labels map[int32]semantics.LabelSet) {
	sort.SliceStable(insts, func(i, j int) bool { return insts[i].ID < insts[j].ID })
	in := &indom{insts: insts}
	for k := range insts {
		insts[k].Labels = labels[insts[k].ID]
	}
	md.indoms[id] = in
}

// details takes the replies of client.readDetails into md and into the
// texts and labels the metrics are assembled from.
type details struct {
	md            *metadata
	oneline, help map[semantics.PMID]string
	labels        map[request]semantics.LabelSet
	// instLabels are the instance labels read, by instance domain
	instLabels map[semantics.InDom]map[int32]semantics.LabelSet
}

func (d *details) text(r request, text string) {
	if r.sub&textOneLine != 0 {
		d.oneline[semantics.PMID(r.ident)] = text
	} else {
		d.help[semantics.PMID(r.ident)] = text
	}
}

func (d *details) instances(in semantics.InDom, insts []source.Instance, cut int) {
	d.md.setInstances(in, insts, d.instLabels[in])
	d.md.indoms[in].cut = cut
}

func (d *details) labelSets(r request, sets []labelSet) {
	d.md.noteMalformed(r.sub, r.ident, sets)
	if r.sub != labelInstances {
		if len(sets) > 0 {
			d.labels[r] = sets[0].labels
		}
		return
	}
	m := map[int32]semantics.LabelSet{}
	for _, s := range sets {
		m[s.inst] = s.labels
	}
	if d.instLabels == nil {
		d.instLabels = map[semantics.InDom]map[int32]semantics.LabelSet{}
	}
	d.instLabels[semantics.InDom(r.ident)] = m
	if in := d.md.indoms[semantics.InDom(r.ident)]; in != nil {
		for k := range in.insts {
			in.insts[k].Labels = m[in.insts[k].ID]
		}
	}
}

// helpFallback gives descs' metrics without a help text their one-line
// text, as pmLookupText(PM_TEXT_HELP) answers where pmcd has no long text
// or an empty one (libpcp's help.c, fallbacktext).
func (d *details) helpFallback(descs []*semantics.Desc) {
	for _, desc := range descs {
		if desc != nil && d.help[desc.PMID] == "" {
			d.help[desc.PMID] = d.oneline[desc.PMID]
		}
	}
}
