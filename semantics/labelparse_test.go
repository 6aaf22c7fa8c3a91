package semantics

import "testing"

// The example of pcp-spec.md 1.5: {"domainname":"localdomain",...} gives the
// pmLabel (2,10,...,14,13); string values keep their quotes.
func TestLabelSetFromJSONB(t *testing.T) {
	js := []byte(`{"domainname":"localdomain","groupid":0}`)
	s, err := LabelSetFromJSONB(js, []LabelIndex{
		{Name: 29, NameLen: 7, Flags: 0x01, Value: 38, ValueLen: 1},
		{Name: 2, NameLen: 10, Flags: 0x81, Value: 14, ValueLen: 13},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.String(); got != `{"domainname":"localdomain","groupid":0}` {
		t.Errorf("got %s", got)
	}
	if l, _ := s.Get("domainname"); l.Flags != LabelContext|LabelOptional {
		t.Errorf("flags %#x", l.Flags)
	}
	for _, bad := range [][]LabelIndex{
		{{Name: 2, NameLen: 200, Value: 14, ValueLen: 13}},
		{{Name: 2, NameLen: 10, Value: 14, ValueLen: 60000}},
		{{Name: 2, NameLen: 0, Value: 14, ValueLen: 13}},
		{{Name: 2, NameLen: 10, Value: 13, ValueLen: 3}}, // `:"l` is not JSON
	} {
		if _, err := LabelSetFromJSONB(js, bad); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

// Merging follows the hierarchy of seed 000 (PMAPI 3.4): the label of the
// highest level wins. The expected set is pminfo -l's answer for
// kernel.percpu.cpu.user instance 0 of the corpus's live archive.
func TestMergeLabels(t *testing.T) {
	ctx, _ := ParseLabelsJSON([]byte(`{"domainname":"localdomain","groupid":0,"hostname":"vm","machineid":"3d1219c7c4c5404aaa1f6d2a48adfda4","userid":0}`), LabelContext)
	dom, _ := ParseLabelsJSON([]byte(`{"agent":"linux"}`), LabelDomain)
	ind, _ := ParseLabelsJSON([]byte(`{"device_type":"cpu","indom_name":"per cpu"}`), LabelInDom)
	inst, _ := ParseLabelsJSON([]byte(`{ "cpu" : 0 }`), LabelInstances)
	got := MergeLabels(ctx, dom, ind, nil, nil, inst).String()
	want := `{"agent":"linux","cpu":0,"device_type":"cpu","domainname":"localdomain","groupid":0,"hostname":"vm","indom_name":"per cpu","machineid":"3d1219c7c4c5404aaa1f6d2a48adfda4","userid":0}`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	over, _ := ParseLabelsJSON([]byte(`{"hostname":"other"}`), LabelItem)
	if l, _ := MergeLabels(ctx, over).Get("hostname"); l.Value != `"other"` || l.Flags != LabelItem {
		t.Errorf("item label did not override context: %+v", l)
	}
	if _, err := ParseLabelsJSON([]byte(`[1]`), LabelContext); err == nil {
		t.Error("array accepted as label set")
	}
}
