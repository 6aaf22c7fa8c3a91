package mapping_test

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/mapping"
	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
	"github.com/pcp-exporter/pcp-exporter/source/archive"
	"github.com/pcp-exporter/pcp-exporter/source/archive/pcplog"
)

// TestNodeFamilyNames: the profile's names are node_exporter's form:
// unique, valid, counters (only) ending in _total.
func TestNodeFamilyNames(t *testing.T) {
	valid := regexp.MustCompile(`^node_[a-zA-Z0-9_]+$`)
	seen := map[string]bool{}
	for _, n := range mapping.NodeFamilyNames() {
		if seen[n] || !valid.MatchString(n) {
			t.Errorf("%s: duplicate or invalid", n)
		}
		seen[n] = true
	}
	if len(seen) < 170 {
		t.Errorf("%d families", len(seen))
	}
}

// TestNodeSourceArchive reads the corpus archive `live` (a linux host
// recorded by pmlogger) through the node profile: the families its
// metrics give, with node_exporter's labels, and values equal to the PCP
// values of the same fetch converted as node_exporter's collectors read
// /proc (ms to s, KiB to bytes, the load as printed); the PCP metrics used
// are no longer listed, the others are.
func TestNodeSourceArchive(t *testing.T) {
	as, err := pcplog.OpenAll([]string{"../testdata/pcp-corpus/archives/live/live"})
	if err != nil {
		t.Fatal(err)
	}
	rp, err := archive.NewReplay(as, archive.ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rp.Close()
	n := mapping.NamingNode
	m, err := mapping.New(nil, mapping.Options{Naming: &n})
	if err != nil {
		t.Fatal(err)
	}
	src := m.Wrap(rp)
	if m.Wrap(src) != src {
		t.Error("Wrap of a wrapped source wraps it again")
	}
	byName := map[string]source.Metric{}
	for _, md := range src.Metrics() {
		byName[md.Name] = md
	}
	for _, gone := range []string{"kernel.percpu.cpu.user", "kernel.all.load", "mem.util.free", "network.interface.in.bytes"} {
		if _, ok := byName[gone]; ok {
			t.Errorf("%s still listed", gone)
		}
	}
	for _, kept := range []string{"kernel.all.cpu.user", "kernel.uname.release", "disk.dev.read_bytes"} {
		if _, ok := byName[kept]; !ok {
			t.Errorf("%s not listed", kept)
		}
	}
	raw := rp.Metrics()
	rawPMID := func(name string) semantics.PMID {
		for _, md := range raw {
			if md.Name == name {
				return md.Desc.PMID
			}
		}
		t.Fatalf("%s not in the archive", name)
		return 0
	}
	type check struct {
		family, pcp string
		labels      func(inst string) string // node labels of a PCP instance ("" to skip it)
		conv        func(semantics.Value) float64
	}
	ms := func(v semantics.Value) float64 { return v.Float64() * (1.0 / 1000) } // pmConvScale's v * (mult/div)
	kib := func(v semantics.Value) float64 { return v.Float64() * 1024 }
	same := func(v semantics.Value) float64 { return v.Float64() }
	checks := []check{
		{"node_cpu_seconds_total", "kernel.percpu.cpu.user", func(i string) string { return `cpu="` + strings.TrimPrefix(i, "cpu") + `",mode="user"` }, ms},
		{"node_load1", "kernel.all.load", func(i string) string {
			if i == "1 minute" {
				return "-"
			}
			return ""
		}, nil},
		{"node_memory_MemFree_bytes", "mem.util.free", nil, kib},
		{"node_memory_Cached_bytes", "mem.util.cached", nil, kib},
		{"node_memory_HugePages_Total", "mem.util.hugepagesTotal", nil, same},
		{"node_network_receive_bytes_total", "network.interface.in.bytes", func(i string) string { return `device="` + i + `"` }, same},
	}
	at := rp.Start().Add(30 * time.Second)
	var pmids []semantics.PMID
	for _, c := range checks {
		md, ok := byName[c.family]
		if !ok {
			t.Fatalf("%s not listed", c.family)
		}
		pmids = append(pmids, md.Desc.PMID, rawPMID(c.pcp))
	}
	var res source.Result
	if err := src.Fetch(at, pmids, &res); err != nil {
		t.Fatal(err)
	}
	for k, c := range checks {
		fam, pcp := res.Sets[2*k], res.Sets[2*k+1]
		if fam.Err != nil || pcp.Err != nil || len(pcp.Values) == 0 {
			t.Fatalf("%s: %v, %s: %v (%d values)", c.family, fam.Err, c.pcp, pcp.Err, len(pcp.Values))
		}
		famDesc := byName[c.family].Desc
		got := map[string]float64{}
		for _, iv := range fam.Values {
			key := "-"
			if famDesc.InDom != semantics.InDomNull {
				key = instName(src, famDesc.InDom, iv.Inst)
			}
			got[key] = iv.Value.Float64()
		}
		want := map[string]float64{}
		for _, iv := range pcp.Values {
			key := "-"
			if c.labels != nil {
				key = c.labels(instName(rp, rawDesc(raw, c.pcp).InDom, iv.Inst))
			}
			if key == "" {
				continue
			}
			if c.conv == nil {
				// a FLOAT load as /proc/loadavg printed it: pminfo -f
				// shows 4.6300001 for the 4.63 read
				want[key], _ = strconv.ParseFloat(fmt.Sprint(iv.Value.Float32()), 64)
				continue
			}
			want[key] = c.conv(iv.Value)
		}
		if len(got) != len(want) {
			t.Errorf("%s: %v, want %v", c.family, got, want)
			continue
		}
		for k, w := range want {
			if g, ok := got[k]; !ok || g != w {
				t.Errorf("%s{%s} = %v, want %v (from %s)", c.family, k, g, w, c.pcp)
			}
		}
	}
}

func rawDesc(ms []source.Metric, name string) semantics.Desc {
	for _, md := range ms {
		if md.Name == name {
			return md.Desc
		}
	}
	return semantics.Desc{}
}

func instName(src source.Source, indom semantics.InDom, id int32) string {
	ins, _ := source.InstancesInForce(src, indom, time.Time{})
	for _, in := range ins {
		if in.ID == id {
			return in.Name
		}
	}
	return ""
}

// churnSource is a host whose one network interface is a new one at
// every fetch (a container host's veth devices).
type churnSource struct{ n int32 }

var churnIndom = semantics.NewInDom(60, 3)

func (c *churnSource) Metrics() []source.Metric {
	return churnMetrics
}

var churnMetrics = []source.Metric{{Name: "network.interface.in.bytes", Desc: semantics.Desc{PMID: semantics.NewPMID(60, 3, 0), Type: semantics.TypeU64, InDom: churnIndom, Sem: semantics.SemCounter, Units: semantics.Units{DimSpace: 1}}}}

func (c *churnSource) Instances(semantics.InDom) []source.Instance {
	return []source.Instance{{ID: c.n, Name: fmt.Sprintf("veth%d", c.n)}}
}
func (c *churnSource) Fetch(_ time.Time, pmids []semantics.PMID, res *source.Result) error {
	c.n++
	res.Sets = []source.ValueSet{{PMID: pmids[0], Values: []source.InstValue{{Inst: c.n, Value: semantics.Uint64Value(uint64(c.n))}}}}
	return nil
}
func (c *churnSource) Close() error { return nil }

// TestNodeSourceChurn: the label sets of interfaces gone are forgotten,
// so a family's instances stay bounded; the live one is always named.
func TestNodeSourceChurn(t *testing.T) {
	w := mapping.NewNodeSource(&churnSource{})
	var fam source.Metric
	for _, md := range w.Metrics() {
		if md.Name == "node_network_receive_bytes_total" {
			fam = md
		}
	}
	var res source.Result
	for i := 0; i < 1000; i++ {
		if err := w.Fetch(time.Now(), []semantics.PMID{fam.Desc.PMID}, &res); err != nil {
			t.Fatal(err)
		}
		id := res.Sets[0].Values[0].Inst
		if got := instName(w, fam.Desc.InDom, id); got != fmt.Sprintf(`device="veth%d"`, i+1) {
			t.Fatalf("fetch %d: instance %d is %q", i, id, got)
		}
	}
	if n := len(w.Instances(fam.Desc.InDom)); n > 65 {
		t.Errorf("%d instances kept after 1000 interfaces came and went", n)
	}
}
