package bridge

import (
	"fmt"

	"github.com/pcp-exporter/pcp-exporter/mapping"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// Reconfigure swaps the collector's mapper and, when srcs is not nil, its
// sources' readers (the same sources with other derived metrics, one per
// source in order) between two scrapes; the next read maps everything
// again. The readers replaced are not closed.
func (c *Collector) Reconfigure(mapper *mapping.Mapper, srcs []source.Source) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if srcs != nil && len(srcs) != len(c.sources) {
		return fmt.Errorf("reconfigure: %d sources for %d", len(srcs), len(c.sources))
	}
	c.mapper = mapper
	for i, s := range c.sources {
		if srcs != nil {
			s.Src = srcs[i]
		}
		s.Src = mapper.Wrap(s.Src)
		s.sig = 0 // remap at the next read
		s.text = textCache{}
	}
	return nil
}

// Sources returns the readers of the collector's sources, in order.
func (c *Collector) Sources() []source.Source {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]source.Source, len(c.sources))
	for i, s := range c.sources {
		out[i] = mapping.StripNode(s.Src)
	}
	return out
}

// Reconfigurable is what a reload reconfigures: the Collector of
// /metrics and the OTLP push read (OTelProducer).
type Reconfigurable interface {
	Sources() []source.Source
	Reconfigure(*mapping.Mapper, []source.Source) error
}

// ReconfigureAll gives every target mapper and its sources' readers as
// rewrap makes them from the ones in use (other derived metrics over the
// same sources). Every reader is rewrapped before any target changes: when
// one fails, nothing changes.
func ReconfigureAll(mapper *mapping.Mapper, rewrap func(source.Source) (source.Source, error), targets ...Reconfigurable) error {
	srcs := make([][]source.Source, len(targets))
	for i, t := range targets {
		for _, s := range t.Sources() {
			w, err := rewrap(s)
			if err != nil {
				return err
			}
			srcs[i] = append(srcs[i], w)
		}
	}
	for i, t := range targets {
		if err := t.Reconfigure(mapper, srcs[i]); err != nil {
			return err
		}
	}
	return nil
}
