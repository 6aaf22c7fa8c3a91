package backfill

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricpb "go.opentelemetry.io/proto/otlp/metrics/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
)

// exportRequest is the OTLP/HTTP request of rm, holding what the sink
// builds: gauges and cumulative sums of float64, and of int64 (the
// hostmetrics naming's int metrics).
func exportRequest(rm *metricdata.ResourceMetrics) *colmetricpb.ExportMetricsServiceRequest {
	prm := &metricpb.ResourceMetrics{Resource: &resourcepb.Resource{}}
	if rm.Resource != nil {
		prm.Resource.Attributes = keyValues(rm.Resource.Iter())
		prm.SchemaUrl = rm.Resource.SchemaURL()
	}
	for _, sm := range rm.ScopeMetrics {
		psm := &metricpb.ScopeMetrics{Scope: &commonpb.InstrumentationScope{Name: sm.Scope.Name, Version: sm.Scope.Version}, SchemaUrl: sm.Scope.SchemaURL}
		for _, m := range sm.Metrics {
			pm := &metricpb.Metric{Name: m.Name, Description: m.Description, Unit: m.Unit}
			switch d := m.Data.(type) {
			case metricdata.Sum[float64]:
				pm.Data = sum(d, setDouble)
			case metricdata.Gauge[float64]:
				pm.Data = &metricpb.Metric_Gauge{Gauge: &metricpb.Gauge{DataPoints: points(d.DataPoints, setDouble)}}
			case metricdata.Sum[int64]: // the hostmetrics naming's int metrics
				pm.Data = sum(d, setInt)
			case metricdata.Gauge[int64]:
				pm.Data = &metricpb.Metric_Gauge{Gauge: &metricpb.Gauge{DataPoints: points(d.DataPoints, setInt)}}
			}
			psm.Metrics = append(psm.Metrics, pm)
		}
		prm.ScopeMetrics = append(prm.ScopeMetrics, psm)
	}
	return &colmetricpb.ExportMetricsServiceRequest{ResourceMetrics: []*metricpb.ResourceMetrics{prm}}
}

// sum is the OTLP form of a Sum whose point values set puts in place.
func sum[N int64 | float64](d metricdata.Sum[N], set func(*metricpb.NumberDataPoint, N)) *metricpb.Metric_Sum {
	temp := metricpb.AggregationTemporality_AGGREGATION_TEMPORALITY_CUMULATIVE
	if d.Temporality == metricdata.DeltaTemporality {
		temp = metricpb.AggregationTemporality_AGGREGATION_TEMPORALITY_DELTA
	}
	return &metricpb.Metric_Sum{Sum: &metricpb.Sum{AggregationTemporality: temp, IsMonotonic: d.IsMonotonic, DataPoints: points(d.DataPoints, set)}}
}

// points is the OTLP form of data points whose values set puts in place.
func points[N int64 | float64](dps []metricdata.DataPoint[N], set func(*metricpb.NumberDataPoint, N)) []*metricpb.NumberDataPoint {
	out := make([]*metricpb.NumberDataPoint, len(dps))
	for i, dp := range dps {
		p := &metricpb.NumberDataPoint{Attributes: keyValues(dp.Attributes.Iter()), TimeUnixNano: uint64(dp.Time.UnixNano())}
		set(p, dp.Value)
		if !dp.StartTime.IsZero() {
			p.StartTimeUnixNano = uint64(dp.StartTime.UnixNano())
		}
		out[i] = p
	}
	return out
}

func setDouble(p *metricpb.NumberDataPoint, v float64) {
	p.Value = &metricpb.NumberDataPoint_AsDouble{AsDouble: v}
}

func setInt(p *metricpb.NumberDataPoint, v int64) {
	p.Value = &metricpb.NumberDataPoint_AsInt{AsInt: v}
}

func keyValues(it attribute.Iterator) []*commonpb.KeyValue {
	var out []*commonpb.KeyValue
	for it.Next() {
		kv := it.Attribute()
		v := &commonpb.AnyValue{}
		switch kv.Value.Type() {
		case attribute.BOOL:
			v.Value = &commonpb.AnyValue_BoolValue{BoolValue: kv.Value.AsBool()}
		case attribute.INT64:
			v.Value = &commonpb.AnyValue_IntValue{IntValue: kv.Value.AsInt64()}
		case attribute.FLOAT64:
			v.Value = &commonpb.AnyValue_DoubleValue{DoubleValue: kv.Value.AsFloat64()}
		default:
			v.Value = &commonpb.AnyValue_StringValue{StringValue: kv.Value.String()}
		}
		out = append(out, &commonpb.KeyValue{Key: string(kv.Key), Value: v})
	}
	return out
}
