package archive

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
	"github.com/pcp-exporter/pcp-exporter/source/archive/internal/archivetest"
	"github.com/pcp-exporter/pcp-exporter/source/archive/pcplog"
)

// TestFollowZeroTailedVolume: an archive being followed whose volume ends
// in zeros (a crashed pmlogger's tail; issue 37 item 6) is read up to them,
// as libpcp reads it (pmdumplog prints every record before the zeros), its
// last record's values served, the zeros reported with their file and
// offset. (Records written after the zeros are not read: libpcp reads
// none either.)
func TestFollowZeroTailedVolume(t *testing.T) {
	dir := t.TempDir()
	archivetest.CopyArchive(t, filepath.Join(corpus, "archives", "live", "live_v3"), dir)
	vol := filepath.Join(dir, "live_v3.0")
	full, err := os.ReadFile(vol)
	if err != nil {
		t.Fatal(err)
	}
	a, err := pcplog.Open(filepath.Join(dir, "live_v3"))
	if err != nil {
		t.Fatal(err)
	}
	offs, times := recordsOf(a)
	half := len(offs) / 2
	cut := offs[half]
	// the first half, then zeros as long as the rest
	zeroed := append(append([]byte(nil), full[:cut]...), make([]byte, len(full)-int(cut))...)
	if err := os.WriteFile(vol, zeroed, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, "live_v3.index"))
	f := NewFollow(filepath.Join(dir, "live_v3"), FollowOptions{})
	defer f.Close()
	var pmids []semantics.PMID
	for _, m := range f.Metrics() {
		pmids = append(pmids, m.Desc.PMID)
	}
	if len(pmids) == 0 {
		t.Fatalf("no metrics: %+v", f.Status(time.Now()))
	}
	var res source.Result
	if err := f.Fetch(times[len(times)-1].Add(time.Hour), pmids, &res); err != nil {
		t.Fatal(err)
	}
	if !res.Time.Equal(times[half-1]) {
		t.Errorf("served %v, want the last record before the zeros %v", res.Time, times[half-1])
	}
	err = f.Truncated()
	if err == nil || !strings.Contains(err.Error(), "live_v3.0: offset "+strconv.FormatInt(cut, 10)+": zeros") {
		t.Errorf("Truncated: %v, want the zeros at offset %d", err, cut)
	}
}
