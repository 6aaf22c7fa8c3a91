package bridge

import (
	"math"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// IntData returns d, a float64 Sum or Gauge, with its values as int64
// (rounded to the nearest), for an instrument of value_type int
// (mapping.Instrument.Int: the hostmetrics naming's whole-number metrics);
// other data unchanged.
func IntData(d metricdata.Aggregation) metricdata.Aggregation {
	conv := func(in []metricdata.DataPoint[float64]) []metricdata.DataPoint[int64] {
		out := make([]metricdata.DataPoint[int64], len(in))
		for i, p := range in {
			out[i] = metricdata.DataPoint[int64]{Attributes: p.Attributes, StartTime: p.StartTime, Time: p.Time, Value: int64(math.Round(p.Value)), Exemplars: nil}
		}
		return out
	}
	switch d := d.(type) {
	case metricdata.Sum[float64]:
		return metricdata.Sum[int64]{DataPoints: conv(d.DataPoints), Temporality: d.Temporality, IsMonotonic: d.IsMonotonic}
	case metricdata.Gauge[float64]:
		return metricdata.Gauge[int64]{DataPoints: conv(d.DataPoints)}
	}
	return d
}
