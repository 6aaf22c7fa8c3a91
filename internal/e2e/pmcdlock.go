package e2e

import (
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

// The system pmcd is shared by the test binaries that `go test ./...` runs
// in parallel: a test that restarts it (LockPMCD exclusive) would break
// another package's test that records from it meanwhile or compares with
// it (LockPMCD shared). No test restarts it today (the restart tests run
// a private pmcd, StartPMCD), so every holder takes it shared; the
// exclusive mode is kept for a test that must stop the system pmcd. The
// lock is a flock on one file in the temporary directory, held until the
// test ends; tests of one binary run one at a time, so a process holds it
// in one mode at once (a later exclusive request in the same test
// converts it).
var pmcdLock struct {
	file string // the lock file (a test of this package sets its own)
	sync.Mutex
	f         *os.File
	exclusive bool
	holders   int
}

// LockPMCD holds the machine-wide lock on the local pmcd until t ends:
// shared for a test that needs pmcd to stay up, exclusive for one that
// restarts it. It waits for the lock; an error taking it fails t.
func LockPMCD(t testing.TB, exclusive bool) {
	t.Helper()
	l := &pmcdLock
	l.Lock()
	defer l.Unlock()
	if l.f == nil {
		if l.file == "" {
			l.file = filepath.Join(os.TempDir(), "pcp-exporter-test-pmcd.lock")
		}
		f, err := os.OpenFile(l.file, os.O_RDWR|os.O_CREATE, 0o666)
		if err != nil {
			t.Fatalf("pmcd test lock: %v", err)
		}
		l.f = f
	}
	if l.holders == 0 || (exclusive && !l.exclusive) {
		how := syscall.LOCK_SH
		if exclusive || l.exclusive {
			how = syscall.LOCK_EX
		}
		if err := syscall.Flock(int(l.f.Fd()), how); err != nil {
			t.Fatalf("pmcd test lock: %v", err)
		}
		l.exclusive = how == syscall.LOCK_EX
	}
	l.holders++
	t.Cleanup(func() {
		l.Lock()
		defer l.Unlock()
		if l.holders--; l.holders == 0 {
			syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
			l.f.Close()
			l.f, l.exclusive = nil, false
		}
	})
}
