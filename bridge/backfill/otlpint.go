package backfill

import (
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"
)

// setIntData sets pm's data to the OTLP form of an int64 Sum or Gauge
// (bridge.IntData: the hostmetrics naming's metrics of value_type int);
// other data are left out.
func setIntData(pm *metricpb.Metric, d metricdata.Aggregation) {
	pts := func(dps []metricdata.DataPoint[int64]) []*metricpb.NumberDataPoint {
		out := make([]*metricpb.NumberDataPoint, len(dps))
		for i, dp := range dps {
			p := &metricpb.NumberDataPoint{Attributes: keyValues(dp.Attributes.Iter()), TimeUnixNano: uint64(dp.Time.UnixNano()),
				Value: &metricpb.NumberDataPoint_AsInt{AsInt: dp.Value}}
			if !dp.StartTime.IsZero() {
				p.StartTimeUnixNano = uint64(dp.StartTime.UnixNano())
			}
			out[i] = p
		}
		return out
	}
	switch d := d.(type) {
	case metricdata.Sum[int64]:
		temp := metricpb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE
		if d.Temporality == metricdata.DeltaTemporality {
			temp = metricpb.AggregationTemporality_AGGREGATION_TEMPORALITY_DELTA
		}
		pm.Data = &metricpb.Metric_Sum{Sum: &metricpb.Sum{AggregationTemporality: temp, IsMonotonic: d.IsMonotonic, DataPoints: pts(d.DataPoints)}}
	case metricdata.Gauge[int64]:
		pm.Data = &metricpb.Metric_Gauge{Gauge: &metricpb.Gauge{DataPoints: pts(d.DataPoints)}}
	}
}
