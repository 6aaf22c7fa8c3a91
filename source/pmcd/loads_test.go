package pmcd

import (
	"strings"
	"testing"
	"time"
)

// TestLoadsBound: with Options.Loads of one place, a second source's
// metadata read waits, without dialing, until the first one's (stalled)
// ends; then it is read.
func TestLoadsBound(t *testing.T) {
	a, b := newFake(t), newFake(t)
	release := a.stallMetadata(pduPMNSTraverse)
	loads := make(chan struct{}, 1)
	opts := Options{Timeout: testTimeout, MetadataTimeout: 5 * time.Second, Loads: loads}
	sa, err := New(a.addr(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer sa.Close()
	sb, err := New(b.addr(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if err := sa.ConnectBy(time.Now().Add(200 * time.Millisecond)); err == nil || !strings.Contains(err.Error(), "still reading") {
		t.Fatalf("a stalled read: %v", err)
	}
	if err := sb.ConnectBy(time.Now().Add(300 * time.Millisecond)); err == nil || !strings.Contains(err.Error(), "still reading") {
		t.Fatalf("a read waiting for its place: %v", err)
	}
	if n := len(b.connections()); n != 0 {
		t.Fatalf("the waiting read dialed %d times", n)
	}
	release()
	for _, s := range []*Source{sa, sb} {
		if err := s.ConnectBy(time.Now().Add(5 * time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if len(loads) != 0 {
		t.Errorf("%d places still taken", len(loads))
	}
}
