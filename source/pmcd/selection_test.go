package pmcd

import "testing"

func TestSelection(t *testing.T) {
	s, err := ParseSelection([]string{"kernel", "network.*.in.*", "-kernel.percpu", "-*.bytes"})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{
		"kernel.all.load":              true,
		"kernel":                       true,
		"kernelx.y":                    false,
		"kernel.percpu.cpu.user":       false,
		"network.interface.in.packets": true,
		"network.interface.in.bytes":   false,
		"mem.util.used":                false,
	} {
		if got := s.Selected(name); got != want {
			t.Errorf("%s: selected %v, want %v", name, got, want)
		}
	}
	if !(Selection{}).Selected("anything") {
		t.Error("the empty selection selects nothing")
	}
	for _, bad := range []string{"", "-", ".kernel", "kernel.", "a[b"} {
		if _, err := ParseSelection([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestParseSpec(t *testing.T) {
	t.Setenv("PMCD_PORT", "")
	t.Setenv("PMCD_SOCKET", "/x/pmcd.socket")
	for spec, want := range map[string]string{
		"":                "unix:/x/pmcd.socket",
		"local:":          "unix:/x/pmcd.socket",
		"unix:/run/s":     "unix:/run/s",
		"/run/pcp/socket": "unix:/run/pcp/socket",
		"host":            "host:44321",
		"host:4000":       "host:4000",
		"[::1]:4000":      "[::1]:4000",
		"::1":             "[::1]:44321",
	} {
		ep, err := ParseSpec(spec)
		if err != nil || ep.String() != want {
			t.Errorf("%q: %v %v, want %s", spec, ep, err, want)
		}
	}
	for _, bad := range []string{"unix:", "host:0", "host:x", "a b"} {
		if _, err := ParseSpec(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
