package pcplog

import "github.com/pcp-exporter/pcp-exporter/semantics"

type keepCache struct {
	pmid  semantics.PMID
	keep  bool
	valid bool
}

// Only restricts the value sets of the records the Reader returns to the
// metrics keep accepts: the others are skipped without decoding their
// values (still checked to lie inside the record). A mark record stays a
// mark; a record whose sets are all skipped has no sets. keep is asked
// once per metric position and cached, as records repeat their layout.
func (r *Reader) Only(keep func(semantics.PMID) bool) {
	r.keep = keep
	r.keeps = r.keeps[:0]
	r.layN = -1
}
