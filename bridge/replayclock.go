package bridge

import (
	"sync"
	"time"

	"github.com/pcp-exporter/pcp-exporter/source"
)

// ReplayClock maps scrape wall times to archive times for serving an archive
// replay: a scrape at wall time W serves archive time Start + Speed*(W-W0),
// W0 being the first scrape. Past the end, Loop starts over from Start;
// otherwise the end is served (the last values) while End, re-read through
// the End function, does not move (an archive still being written keeps
// advancing).
type ReplayClock struct {
	Start time.Time
	Speed float64
	Loop  bool
	// End returns the current end of the archive.
	End func() (time.Time, error)

	mu    sync.Mutex
	w0    time.Time
	end   time.Time
	ended bool // the last When was past the end (without Loop)
}

// When is a Source.When function.
func (c *ReplayClock) When(now time.Time) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.w0.IsZero() {
		c.w0 = now
	}
	speed := c.Speed
	if speed <= 0 {
		speed = 1
	}
	t := c.Start.Add(time.Duration(float64(now.Sub(c.w0)) * speed))
	if c.end.IsZero() || t.After(c.end) {
		if end, err := c.End(); err == nil {
			c.end = end
		}
	}
	if c.end.IsZero() || !t.After(c.end) {
		c.ended = false
		return t, true
	}
	if c.Loop {
		span := c.end.Sub(c.Start)
		if span <= 0 {
			return c.Start, true
		}
		over := t.Sub(c.Start) % span
		return c.Start.Add(over), true
	}
	c.ended = true
	return c.end, true
}

// Watch returns src reporting the replay's end as its status
// (source.Monitored): "ended" once the clock passed the end of the archive
// without Loop, the last values being served from then on.
func (c *ReplayClock) Watch(src source.Source) source.Source {
	return &replayed{Source: src, clock: c}
}

// replayed is a source replayed on a ReplayClock.
type replayed struct {
	source.Source
	clock *ReplayClock
}

func (r *replayed) Unwrap() source.Source { return r.Source }

func (r *replayed) Status(time.Time) source.Status {
	c := r.clock
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.ended {
		return source.Status{Lag: -1}
	}
	return source.Status{Reason: source.ReasonEnded, Lag: -1,
		Detail: "the replay reached the end of the archive (" + c.end.UTC().Format(time.RFC3339Nano) + "); its last values stay (a looping replay starts over instead)"}
}
