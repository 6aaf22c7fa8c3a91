package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/alecthomas/kingpin/v2"

	"github.com/pcp-exporter/pcp-exporter/source/archive/pcplog"
)

func TestDerivedFlags(t *testing.T) {
	t.Setenv("PCP_DERIVED_CONFIG", "")
	app := kingpin.New("t", "")
	cmd := app.Command("x", "")
	f := addDerivedFlags(cmd)
	if _, err := app.Parse([]string{"x", "--derived.config", "../../testdata/derived/seed.conf"}); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	a, err := pcplog.Open("../../testdata/pcp-corpus/archives/seedtables/seedtables")
	if err != nil {
		t.Fatal(err)
	}
	ms, err := f.describe(a.Metrics(), logger)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, m := range ms {
		got[m.Name] = m.Desc.PMID.String() + " " + m.Desc.Type.String() + " " + m.Desc.Units.String() + " " + m.OneLine
	}
	for name, want := range map[string]string{
		"seed.derived.sum":  "511.0.3 64 count ",
		"seed.derived.rate": "511.0.4 double count / sec counter rate",
		"seed.counter":      "245.0.1 u64 count ",
	} {
		if got[name] != want {
			t.Errorf("%s: %q, want %q", name, got[name], want)
		}
	}
	if _, ok := got["seed.derived.absent"]; ok {
		t.Error("a metric with an unknown operand is listed")
	}
	if !strings.Contains(logs.String(), "seed.conf:6] Error: pmLoadDerivedConfig: missing") {
		t.Errorf("bad line not logged: %s", logs.String())
	}

	// no flag, no environment: nothing is added
	f2 := addDerivedFlags(kingpin.New("t", "").Command("x", ""))
	ms2, err := f2.describe(a.Metrics(), nil)
	if err != nil || len(ms2) != len(a.Metrics()) {
		t.Errorf("without --derived.config: %d metrics, %v", len(ms2), err)
	}
	f3 := &derivedFlags{config: "../../testdata/derived/missing.conf"}
	if _, err := f3.definitions(nil); err == nil {
		t.Error("a missing config file is not an error")
	}
}
