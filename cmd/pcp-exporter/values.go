package main

// The CLI contract's value outputs, shared by fetch, dump and replay: CSV
// rows and JSON lines.

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// sortedValues puts the values of a set in instance id order, in place
// (an archive replay lists them in libpcp's order, see archive.Replay).
func sortedValues(vals []source.InstValue) []source.InstValue {
	for i := 1; i < len(vals); i++ {
		if vals[i].Inst < vals[i-1].Inst {
			slices.SortStableFunc(vals, func(a, b source.InstValue) int { return cmp.Compare(a.Inst, b.Inst) })
			break
		}
	}
	return vals
}

const csvHeader = "time,metric,instance_id,instance,value\n"

// csvRows writes results as the CLI contract's CSV rows (no header): one
// row per value, time,metric,instance_id,instance,value, instances in id
// order with the names in force at the result's time, fields quoted as RFC
// 4180 says (string values always). The metric and instance fields are
// escaped once per name.
type csvRows struct {
	metrics []source.Metric
	insts   *source.InstanceNames
	names   [][]byte     // per metric: its field
	hints   [][]instHint // per metric and value position
	ts      []byte
}

// instHint is the instance last seen at a value position: sets list their
// instances in the same order time after time.
type instHint struct {
	inst int32
	gen  uint64 // of the instance names it was made with
	ok   bool
	// mid is the row's middle: ",metric,instance_id,instance,"
	mid []byte
}

func newCSVRows(metrics []source.Metric, src interface {
	Instances(semantics.InDom) []source.Instance
}) *csvRows {
	c := &csvRows{metrics: metrics, insts: source.NewInstanceNames(src), hints: make([][]instHint, len(metrics))}
	for _, m := range metrics {
		c.names = append(c.names, appendCSVField(nil, m.Name, false))
	}
	return c
}

// append writes the rows of one result.
func (c *csvRows) append(b []byte, res *source.Result) []byte {
	c.ts = semantics.AppendTime(c.ts[:0], res.Time)
	for i, s := range res.Sets {
		if s.Err != nil {
			continue
		}
		indom := c.metrics[i].Desc.InDom
		var gen uint64
		if indom != semantics.InDomNull && len(s.Values) > 0 {
			gen = c.insts.Gen(indom, res.Time)
		}
		vals := sortedValues(s.Values)
		if len(c.hints[i]) < len(vals) {
			c.hints[i] = append(c.hints[i], make([]instHint, len(vals)-len(c.hints[i]))...)
		}
		for j, v := range vals {
			b = append(b, c.ts...)
			h := &c.hints[i][j]
			if !h.ok || h.inst != v.Inst || h.gen != gen {
				mid := append(append([]byte{','}, c.names[i]...), ',')
				if indom != semantics.InDomNull {
					mid = strconv.AppendInt(mid, int64(v.Inst), 10)
					mid = append(mid, ',')
					if in, ok := c.insts.Lookup(indom, v.Inst, res.Time); ok {
						mid = appendCSVField(mid, in.Name, false)
					}
				} else {
					mid = append(mid, ',')
				}
				*h = instHint{inst: v.Inst, gen: gen, ok: true, mid: append(mid, ',')}
			}
			b = append(b, h.mid...)
			if v.Value.Type() == semantics.TypeString {
				b = appendCSVField(b, string(v.Value.Bytes()), true)
			} else {
				b = semantics.AppendText(b, v.Value)
			}
			b = append(b, '\n')
		}
	}
	return b
}

// appendCSVField appends s as an RFC 4180 field, quoted when force is set
// or when s holds a comma, a quote, a line break or leading space.
func appendCSVField(b []byte, s string, force bool) []byte {
	if !force && !strings.ContainsAny(s, ",\"\r\n") && (s == "" || (s[0] != ' ' && s[0] != '\t')) {
		return append(b, s...)
	}
	b = append(b, '"')
	b = append(b, strings.ReplaceAll(s, `"`, `""`)...)
	return append(b, '"')
}

// jsonLines writes values as the CLI contract's JSON lines (dump, fetch and
// replay): one object per record or fetch,
// {"time","metrics":[{"pmid","name","values":[{"inst","value"}]}]}, with
// "error" instead of "values" for a metric whose fetch failed. Metric names
// are escaped once, on first use.
type jsonLines struct {
	name func(i int, p semantics.PMID) string // of set i
	// records: dump's archive records, with a "mark" field after "time"
	// and values in record order (else in instance id order)
	records bool
	names   map[semantics.PMID][]byte
}

// newJSONLines writes the answers of fetches of metrics (fetch, replay).
func newJSONLines(metrics []source.Metric) *jsonLines {
	return &jsonLines{name: func(i int, _ semantics.PMID) string { return metrics[i].Name }, names: map[semantics.PMID][]byte{}}
}

// append writes the line of one record or answer.
func (j *jsonLines) append(b []byte, t time.Time, mark bool, sets []source.ValueSet) []byte {
	b = append(b, `{"time":"`...)
	b = semantics.AppendTime(b, t)
	b = append(b, '"')
	if j.records {
		b = append(b, `,"mark":`...)
		b = strconv.AppendBool(b, mark)
	}
	b = append(b, `,"metrics":[`...)
	for i, s := range sets {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"pmid":"`...)
		b = appendPMID(b, s.PMID)
		b = append(b, `","name":`...)
		n, ok := j.names[s.PMID]
		if !ok {
			n = semantics.AppendJSONString(nil, j.name(i, s.PMID))
			j.names[s.PMID] = n
		}
		b = append(b, n...)
		if s.Err != nil {
			b = append(b, `,"error":`...)
			b = semantics.AppendJSONString(b, s.Err.Error())
			b = append(b, '}')
			continue
		}
		b = append(b, `,"values":[`...)
		vals := s.Values
		if !j.records {
			vals = sortedValues(vals)
		}
		for k, v := range vals {
			if k > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"inst":`...)
			if v.Inst == semantics.InNull {
				b = append(b, "null"...)
			} else {
				b = strconv.AppendInt(b, int64(v.Inst), 10)
			}
			b = append(b, `,"value":`...)
			b = semantics.AppendJSON(b, v.Value)
			b = append(b, '}')
		}
		b = append(b, "]}"...)
	}
	return append(b, "]}\n"...)
}

// appendPMID appends a PMID as domain.cluster.item.
func appendPMID(b []byte, p semantics.PMID) []byte {
	b = strconv.AppendUint(b, uint64(p.Domain()), 10)
	b = append(b, '.')
	b = strconv.AppendUint(b, uint64(p.Cluster()), 10)
	b = append(b, '.')
	return strconv.AppendUint(b, uint64(p.Item()), 10)
}
