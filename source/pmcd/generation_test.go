package pmcd

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/internal/e2e"
	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// pmcdProcess is the local pmcd's pid (its pid file) and its start
// (processStart).
func pmcdProcess(t *testing.T) (int, time.Time) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(filepath.Dir(DefaultSocket()), "pmcd.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid, processStart(t, pid)
}

// processStart is when process pid started, as the kernel has it:
// /proc/stat's btime plus /proc/PID/stat's starttime (clock ticks); ps -o
// lstart must show the same second.
func processStart(t *testing.T, pid int) time.Time {
	t.Helper()
	st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:]))
	ticks, err := strconv.ParseInt(f[19], 10, 64) // field 22, starttime
	if err != nil {
		t.Fatal(err)
	}
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		t.Fatal(err)
	}
	var btime int64
	for _, l := range strings.Split(string(stat), "\n") {
		if v, ok := strings.CutPrefix(l, "btime "); ok {
			btime, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	hz := int64(100)
	if out, err := exec.Command("getconf", "CLK_TCK").Output(); err == nil {
		hz, _ = strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	}
	start := time.Unix(btime, 0).Add(time.Duration(ticks) * time.Second / time.Duration(hz))
	out, err := exec.Command("ps", "-o", "lstart=", "-p", strconv.Itoa(pid)).Output()
	if err != nil {
		t.Fatalf("ps: %v", err)
	}
	lstart, err := time.ParseInLocation("Mon Jan _2 15:04:05 2006", strings.TrimSpace(string(out)), time.Local)
	if err != nil || !lstart.Equal(start.Truncate(time.Second)) {
		t.Fatalf("pmcd %d started at %v (from /proc), ps -o lstart says %q (%v)", pid, start, out, err)
	}
	return start
}

// generations opens spec and returns the generation of a pmcd counter
// (pmcd.pdu_in.total), of a linux agent counter (kernel.all.cpu.user), of
// pmie's counters served by pmcd (pmcd.pmie.*, PMID 2.5.4) and of an xfs one.
func generations(t *testing.T, spec string) (pmcdGen, linux, pmie, xfs time.Time, s *Source) {
	t.Helper()
	s, err := Open(spec, Options{Selection: Selection{Include: []string{"pmcd.pdu_in.total", "kernel.all.cpu.user"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ids := map[string]semantics.PMID{}
	for _, m := range s.Metrics() {
		ids[m.Name] = m.Desc.PMID
	}
	if len(ids) != 2 {
		t.Fatalf("metrics %v", ids)
	}
	return s.Generation(ids["pmcd.pdu_in.total"]), s.Generation(ids["kernel.all.cpu.user"]),
		s.Generation(semantics.NewPMID(2, 5, 4)), s.Generation(semantics.NewPMID(11, 0, 1)), s
}

// TestGenerationsOfLocalPMCD: pmcd's own counters start with pmcd (its
// process start, to the millisecond pmdaproc gives), the linux agent's at
// the host's boot (btime), other agents' are unknown. Over TCP, where the
// proc agent refuses per-process metrics, pmcd's start is unknown.
func TestGenerationsOfLocalPMCD(t *testing.T) {
	e2e.Require(t, "pminfo", "ps")
	e2e.RequirePMCD(t)
	_, start := pmcdProcess(t)
	if os.Geteuid() != 0 {
		t.Skip("pmcd's start is read from the proc agent, which answers root (or pmcd's user) over the unix socket")
	}
	e2e.LockPMCD(t, false)
	pg, lg, ie, xg, _ := generations(t, "local:")
	if d := pg.Sub(start); d < -10*time.Millisecond || d > 10*time.Millisecond {
		t.Errorf("pmcd's counters start at %v, pmcd started at %v (from /proc)", pg, start)
	}
	btime := bootTime(t)
	if !lg.Equal(btime) {
		t.Errorf("the linux agent's counters start at %v, the host booted at %v (btime)", lg, btime)
	}
	if !ie.IsZero() || !xg.IsZero() {
		t.Errorf("pmie's and xfs's counters start at %v and %v, want unknown", ie, xg)
	}
	t.Logf("pmcd started %v (/proc), its counters' generation %v; boot %v, the linux agent's %v", start, pg, btime, lg)
	pg, lg, _, _, _ = generations(t, "127.0.0.1")
	if !pg.IsZero() && !pg.Equal(start) || !lg.Equal(btime) {
		t.Errorf("over TCP: pmcd's counters start at %v (want unknown, or %v), the linux agent's at %v (want %v)", pg, start, lg, btime)
	}
}

func bootTime(t *testing.T) time.Time {
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(stat), "\n") {
		if v, ok := strings.CutPrefix(l, "btime "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return time.Unix(n, 0)
		}
	}
	t.Fatal("no btime in /proc/stat")
	return time.Time{}
}

// TestGenerationAfterPMCDRestart: a restarted pmcd (its counters start
// again) is a new generation of pmcd's counters once the source has
// reconnected by itself; the linux agent's stay the boot. The pmcd is a
// private one (pmcd and linux as DSOs, proc as its pipe agent, as
// Debian's pmcd.conf has them) restarted on its own socket and port.
func TestGenerationAfterPMCDRestart(t *testing.T) {
	t.Parallel()
	e2e.Require(t, "ps")
	if os.Geteuid() != 0 {
		t.Skip("pmcd's start is read from the proc agent, which answers root over the unix socket")
	}
	p := e2e.StartPMCD(t, e2e.PMCDConfig{Agents: e2e.DSOAgents +
		"proc\t3\tpipe\tbinary\t\t/var/lib/pcp/pmdas/proc/pmdaproc -d 3\n"})
	pid0 := p.PID()
	start0 := processStart(t, pid0)
	pg0, lg0, _, _, s := generations(t, "unix:"+p.Socket)
	if d := pg0.Sub(start0); d < -10*time.Millisecond || d > 10*time.Millisecond {
		t.Fatalf("before: pmcd's counters start at %v, pmcd started at %v", pg0, start0)
	}
	if btime := bootTime(t); !lg0.Equal(btime) {
		t.Fatalf("before: the linux agent's counters start at %v, the host booted at %v (btime)", lg0, btime)
	}
	var pmids []semantics.PMID // kernel.all.cpu.user, pmcd.pdu_in.total
	for _, m := range s.Metrics() {
		pmids = append(pmids, m.Desc.PMID)
	}
	p.Restart()
	pid1 := p.PID()
	start1 := processStart(t, pid1)
	if pid1 == pid0 {
		t.Fatalf("pmcd's pid %d did not change", pid1)
	}
	waitFor(t, "reconnection", func() bool {
		time.Sleep(100 * time.Millisecond)
		var res source.Result
		s.Fetch(time.Now(), pmids, &res)
		return s.Status(time.Now()).Reason == source.ReasonUp && !s.Generation(pmids[1]).Equal(pg0)
	})
	pg1 := s.Generation(pmids[1])
	if d := pg1.Sub(start1); d < -10*time.Millisecond || d > 10*time.Millisecond {
		t.Errorf("after the restart: pmcd's counters start at %v, the new pmcd (pid %d) started at %v", pg1, pid1, start1)
	}
	t.Logf("pmcd %d (started %v) restarted as %d (started %v): generation %v, then %v", pid0, start0, pid1, start1, pg0, pg1)
	if lg1 := s.Generation(pmids[0]); !lg1.Equal(lg0) {
		t.Errorf("the linux agent's counters start at %v after pmcd's restart, %v before", lg1, lg0)
	}
}

// TestLabelsOnlyReadMatchesFull: against the local pmcd, reading only the
// labels again gives every metric and instance the labels a full read
// gives (per-process metrics left out: processes come and go between the
// reads).
func TestLabelsOnlyReadMatchesFull(t *testing.T) {
	t.Parallel()
	e2e.RequirePMCD(t)
	s, err := Open("local:", Options{Selection: Selection{Exclude: []string{"mmv", "proc", "hotproc", "cgroup", "acct"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	full := s.md
	// the previous metadata without instance labels: they must be read
	prev := *full
	prev.indoms = map[semantics.InDom]*indom{}
	for id, in := range full.indoms {
		c := &indom{insts: slices.Clone(in.insts)}
		for k := range c.insts {
			c.insts[k].Labels = nil
		}
		prev.indoms[id] = c
	}
	got, _, err := s.load(s.c, time.Now().Add(time.Minute), &prev, staleLabels)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.metrics) != len(full.metrics) || len(full.metrics) < 100 {
		t.Fatalf("%d metrics, want %d", len(got.metrics), len(full.metrics))
	}
	labelled, insts := 0, 0
	for i, m := range full.metrics {
		if g := got.metrics[i]; g.Name != m.Name || g.Help != m.Help || !slices.Equal(g.Labels, m.Labels) {
			t.Errorf("%s: labels %v, a full read %v", m.Name, g.Labels, m.Labels)
		}
		if len(m.Labels) > 0 {
			labelled++
		}
	}
	for id, in := range full.indoms {
		g := got.indoms[id]
		if g == nil || len(g.insts) != len(in.insts) {
			t.Errorf("indom %v: instances differ", id)
			continue
		}
		for k := range in.insts {
			if !slices.Equal(g.insts[k].Labels, in.insts[k].Labels) {
				t.Errorf("indom %v instance %d: labels %v, a full read %v", id, in.insts[k].ID, g.insts[k].Labels, in.insts[k].Labels)
			}
			if len(in.insts[k].Labels) > 0 {
				insts++
			}
		}
	}
	if labelled == 0 || insts == 0 {
		t.Fatal("no labels at all: nothing compared")
	}
	t.Logf("%d metrics (%d with labels), %d instances with labels: the same", len(full.metrics), labelled, insts)
}
