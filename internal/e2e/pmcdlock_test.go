package e2e

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// TestLockPMCD: another process (flock(1)) can take the lock shared while
// this test holds it shared, not while it holds it exclusive, and can take
// it exclusive once the test that held it ended.
func TestLockPMCD(t *testing.T) {
	flock := Require(t, "flock")[0]
	file := filepath.Join(t.TempDir(), "lock") // not the one other packages' tests share
	pmcdLock.file = file
	defer func() { pmcdLock.file = "" }()
	other := func(mode string) bool {
		return exec.Command(flock, "-n", mode, file, "true").Run() == nil
	}
	t.Run("shared", func(t *testing.T) {
		LockPMCD(t, false)
		if !other("-s") {
			t.Error("a shared lock was refused beside a shared one")
		}
		if other("-x") {
			t.Error("an exclusive lock was granted beside a shared one")
		}
	})
	t.Run("exclusive", func(t *testing.T) {
		LockPMCD(t, false)
		LockPMCD(t, true) // converted
		if other("-s") {
			t.Error("a shared lock was granted beside an exclusive one")
		}
	})
	if !other("-x") {
		t.Error("the lock is still held after the tests ended")
	}
}
