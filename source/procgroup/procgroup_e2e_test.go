package procgroup_test

import (
	"crypto/rand"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/internal/e2e"
	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
	"github.com/pcp-exporter/pcp-exporter/source/pmcd"
	"github.com/pcp-exporter/pcp-exporter/source/procgroup"
)

// procOf reads, from /proc, the PIDs whose command name is comm and the
// sum of their user CPU time in milliseconds (stat field 14, in clock
// ticks of 100 Hz, as getconf CLK_TCK says on Linux).
func procOf(t *testing.T, comm string) (pids []int, userMS uint64) {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || close < open || s[open+1:close] != comm {
			continue
		}
		f := strings.Fields(s[close+2:])
		if f[0] == "Z" {
			continue // a zombie: gone for pmdaproc too
		}
		ticks, _ := strconv.ParseUint(f[11], 10, 64) // field 14 of stat
		pids = append(pids, pid)
		userMS += ticks * 10
	}
	return pids, userMS
}

// TestGroupsFollowProc groups the processes of the system pmcd's proc agent
// by command name while the test starts and stops processes of a command of
// its own (a copy of sh spinning in a loop): the group's count is the
// number of such processes /proc lists, its user CPU time lies between the
// sums /proc gives before and after the read while all live, never
// decreases as members exit, and the group stays one instance throughout.
func TestGroupsFollowProc(t *testing.T) {
	e2e.Require(t, "pminfo")
	e2e.LockPMCD(t, false)
	var rb [4]byte
	rand.Read(rb[:])
	comm := "pcpxgrp" + hex.EncodeToString(rb[:]) // 15 bytes: the whole comm
	sh := filepath.Join(t.TempDir(), comm)
	in, err := os.Open("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	out, _ := os.OpenFile(sh, os.O_CREATE|os.O_WRONLY, 0o755)
	io.Copy(out, in)
	in.Close()
	out.Close()

	sel, _ := pmcd.ParseSelection([]string{"proc.psinfo.cmd", "proc.psinfo.utime", "proc.psinfo.stime", "proc.memory.rss", "proc.psinfo.threads", "proc.fd.count", "proc.io.read_bytes", "proc.io.write_bytes"})
	p, err := pmcd.Open("local:", pmcd.Options{Selection: sel, Timeout: 30 * time.Second})
	if err != nil {
		if e2e.Mandatory() {
			t.Fatal(err)
		}
		t.Skipf("pmcd: %v", err)
	}
	src := procgroup.New(p, procgroup.Options{Match: regexp.MustCompile("^" + comm + "$")})
	defer src.Close()
	var pmids []semantics.PMID
	idx := map[string]int{}
	for _, m := range src.Metrics() {
		if strings.HasPrefix(m.Name, "procgroup.") {
			idx[m.Name] = len(pmids)
			pmids = append(pmids, m.Desc.PMID)
		}
	}
	if len(pmids) != 8 {
		t.Fatalf("%d group metrics, want 8: %v", len(pmids), idx)
	}
	var res source.Result
	read := func() (count, user uint64, insts int) {
		t.Helper()
		if err := src.Fetch(time.Now(), pmids, &res); err != nil {
			t.Fatal(err)
		}
		for _, v := range res.Sets[idx["procgroup.count"]].Values {
			count = v.Value.Uint64()
		}
		for _, v := range res.Sets[idx["procgroup.cpu.user"]].Values {
			user = v.Value.Uint64()
		}
		return count, user, len(src.Instances(procgroup.InDom))
	}
	var procs []*exec.Cmd
	start := func(n int) {
		for i := 0; i < n; i++ {
			c := exec.Command(sh, "-c", "while :; do :; done")
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Process.Kill(); c.Wait() })
			procs = append(procs, c)
		}
	}
	stop := func(n int) {
		for i := 0; i < n; i++ {
			c := procs[0]
			procs = procs[1:]
			c.Process.Kill()
			c.Wait()
		}
	}
	var lastUser uint64
	step := func(what string, want int) {
		t.Helper()
		time.Sleep(1500 * time.Millisecond) // CPU time to gain
		pidsBefore, before := procOf(t, comm)
		count, user, insts := read()
		pidsAfter, after := procOf(t, comm)
		if len(pidsBefore) != want || len(pidsAfter) != want {
			t.Fatalf("%s: /proc lists %d then %d processes of %s, want %d", what, len(pidsBefore), len(pidsAfter), comm, want)
		}
		if count != uint64(want) {
			t.Errorf("%s: procgroup.count %d, /proc %d", what, count, want)
		}
		if insts != 1 {
			t.Errorf("%s: %d groups, want 1", what, insts)
		}
		if user < lastUser {
			t.Errorf("%s: procgroup.cpu.user went down: %d -> %d ms", what, lastUser, user)
		}
		if lastUser == 0 && !(before <= user && user <= after) {
			// no member has exited yet: the sum of the live ones
			t.Errorf("%s: procgroup.cpu.user %d ms, /proc %d..%d ms", what, user, before, after)
		}
		if want > 0 && user <= lastUser {
			t.Errorf("%s: procgroup.cpu.user did not rise with %d processes spinning: %d ms", what, want, user)
		}
		t.Logf("%s: count %d, cpu.user %d ms (/proc %d..%d of the live ones)", what, count, user, before, after)
		lastUser = user
	}
	start(3)
	step("3 started", 3)
	stop(1)
	step("1 stopped", 2)
	start(2)
	step("2 more", 4)
	stop(4)
	step("all stopped", 0)
	start(1)
	step("1 again", 1)
}
