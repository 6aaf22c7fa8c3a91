package main

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/internal/e2e"
	"github.com/pcp-exporter/pcp-exporter/source/pmcd"
)

// TestDemoRefusesOtherSources: --demo serves only the embedded recording,
// so naming another source with it is a usage error (exit 2) naming the
// flag, not a source silently ignored.
func TestDemoRefusesOtherSources(t *testing.T) {
	for _, args := range [][]string{
		{"--archive", filepath.Join(corpus, "archives", "live", "live")},
		{"--pmcd=local:"},
		{"--mmv.dir", t.TempDir()},
	} {
		code, out := runMain(t, nil, append([]string{"serve", "--web.listen-address=127.0.0.1:0", "--demo"}, args...)...)
		flag, _, _ := strings.Cut(args[0], "=")
		if code != 2 || !strings.Contains(out, "drop "+flag+" or --demo") {
			t.Errorf("--demo %v: exit %d: %s", args, code, out)
		}
	}
}

// TestArchiveTypoWarns: an --archive path that names nothing is served as
// missing (it may appear later), and said at WARN level with the path at
// start, not at INFO only.
func TestArchiveTypoWarns(t *testing.T) {
	addr := e2e.FreeAddr(t)
	typo := filepath.Join(t.TempDir(), "pmlogger", "hots")
	out := startExporter(t, http.DefaultClient, "http://"+addr, "serve", "--archive", typo, "--web.listen-address="+addr)
	log := out.String()
	warn := regexp.MustCompile(`(?m)^.*level=WARN.*--archive names nothing.*$`).FindString(log)
	if warn == "" || !strings.Contains(warn, typo) {
		t.Errorf("no warning naming %s:\n%s", typo, log)
	}
}

// TestBackfillSaysWhatItSkipped: backfill's summary says what the value
// sets it skipped are: those the archive records as PCP errors, counted
// by error as pmdumplog prints them (mmvchurn: 40 sets "Unknown or illegal
// metric identifier", an MMV file gone while pmlogger logged it).
func TestBackfillSaysWhatItSkipped(t *testing.T) {
	pmdumplog := e2e.Require(t, "pmdumplog")[0]
	arch := filepath.Join(corpus, "archives", "mmvchurn", "mmvchurn")
	want := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^    \S+ \(\S+\): (.+)$`).FindAllStringSubmatch(runOut(t, pmdumplog, arch), -1) {
		if !strings.HasPrefix(m[1], "value") && !strings.HasPrefix(m[1], "inst ") { // values, not errors
			want[m[1]]++
		}
	}
	if len(want) == 0 {
		t.Fatal("pmdumplog lists no error value set")
	}
	omFile := filepath.Join(t.TempDir(), "out.om")
	code, out := runMain(t, nil, "backfill", arch, "--raw", "--output", "openmetrics:"+omFile)
	if code != 0 {
		t.Fatalf("backfill: exit %d: %s", code, out)
	}
	got := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^backfill: skipped (\d+) value sets the archive records as a PCP error instead of values \("(.+)", as pmdumplog prints it\)`).FindAllStringSubmatch(out, -1) {
		n, _ := strconv.Atoi(m[1])
		got[m[2]] += n
	}
	if len(got) != len(want) {
		t.Fatalf("backfill says %v; pmdumplog %v:\n%s", got, want, out)
	}
	for e, n := range want {
		if got[e] != n {
			t.Errorf("%q: backfill skipped %d, pmdumplog lists %d", e, got[e], n)
		}
	}
	os.Remove(omFile)
}

// TestVmstatNoNameClash: every metric of the local pmcd's mem.vmstat
// (pminfo mem.vmstat) gets a family of its own with the default naming:
// mem.vmstat.pgscan_direct_total, which loses its "total" to the counter
// suffix, no longer clashes with mem.vmstat.pgscan_direct (nor
// pgscan_kswapd_total with pgscan_kswapd) and is dropped.
func TestVmstatNoNameClash(t *testing.T) {
	e2e.RequirePMCD(t)
	want := strings.Fields(pminfo(t, "mem.vmstat"))
	if len(want) < 50 {
		t.Skipf("pminfo mem.vmstat lists %d metrics", len(want))
	}
	s, err := pmcd.Open("local:", pmcd.Options{Timeout: 30 * time.Second, Selection: pmcd.Selection{Include: []string{"mem.vmstat"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mapper, err := newMapper("", "default", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	fams, skipped := mapper.MapAll(s.Metrics(), nil)
	for _, sk := range skipped {
		t.Errorf("%s skipped: %s %s", sk.PCPName, sk.Reason, sk.Detail)
	}
	got := map[string]string{}
	for _, f := range fams {
		got[f.PCPName] = f.Name
	}
	for _, n := range want {
		if got[n] == "" {
			t.Errorf("%s: no family", n)
		}
	}
	for pcp, name := range map[string]string{
		"mem.vmstat.pgscan_direct":       "mem_vmstat_pgscan_direct_total",
		"mem.vmstat.pgscan_direct_total": "mem_vmstat_pgscan_directtotal_total",
		"mem.vmstat.pgscan_kswapd_total": "mem_vmstat_pgscan_kswapdtotal_total",
	} {
		if _, ok := got[pcp]; ok && got[pcp] != name {
			t.Errorf("%s: %s, want %s", pcp, got[pcp], name)
		}
	}
}
