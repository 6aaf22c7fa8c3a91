package bridge

import (
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/source"
)

// TestReplayClockEnded: a replay past the end of its archive reports
// "ended" through the source it watches (and its last values stay); a
// looping one and one not yet at the end are up.
func TestReplayClockEnded(t *testing.T) {
	start := time.Unix(1704067200, 0)
	end := start.Add(50 * time.Second)
	w0 := time.Unix(1800000000, 0)
	for _, c := range []struct {
		loop    bool
		after   time.Duration
		want    source.Reason
		wantAt  time.Time
		comment string
	}{
		{false, 10 * time.Second, source.ReasonUp, start.Add(10 * time.Second), "before the end"},
		{false, 50 * time.Second, source.ReasonUp, end, "at the end"},
		{false, 51 * time.Second, source.ReasonEnded, end, "past the end: the last values"},
		{true, 51 * time.Second, source.ReasonUp, start.Add(time.Second), "looping"},
	} {
		clock := &ReplayClock{Start: start, Speed: 1, Loop: c.loop, End: func() (time.Time, error) { return end, nil }}
		src := clock.Watch(nil)
		clock.When(w0)
		at, ok := clock.When(w0.Add(c.after))
		st := source.StatusOf(src, w0.Add(c.after))
		if !ok || !at.Equal(c.wantAt) || st.Reason != c.want || st.Lag >= 0 {
			t.Errorf("%s: served %v (ok %v), status %+v; want %v, %q", c.comment, at, ok, st, c.wantAt, c.want)
		}
		if c.want == source.ReasonEnded && st.Detail == "" {
			t.Errorf("%s: no detail", c.comment)
		}
	}
}
