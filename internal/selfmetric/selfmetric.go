// Package selfmetric is the table of the exporter's own metrics: name,
// type, labels and help of each. Every output declares its self-metrics
// from it, and the README's list of self-metrics is generated from it
// (its test fails when the README is stale; -update rewrites the list).
package selfmetric

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// Type is a self-metric's Prometheus type.
type Type string

// The types of self-metrics.
const (
	Gauge   Type = "gauge"
	Counter Type = "counter"
)

// Metric is one self-metric.
type Metric struct {
	Name   string
	Type   Type
	Labels []string
	Help   string
}

// Desc returns the metric's descriptor, for a collector's const metrics.
func (m *Metric) Desc() *prometheus.Desc {
	return prometheus.NewDesc(m.Name, m.Help, m.Labels, nil)
}

// NewGauge returns the metric as a gauge without labels.
func (m *Metric) NewGauge() prometheus.Gauge {
	m.must(Gauge)
	return prometheus.NewGauge(prometheus.GaugeOpts{Name: m.Name, Help: m.Help})
}

// NewCounter returns the metric as a counter without labels.
func (m *Metric) NewCounter() prometheus.Counter {
	m.must(Counter)
	return prometheus.NewCounter(prometheus.CounterOpts{Name: m.Name, Help: m.Help})
}

func (m *Metric) must(t Type) {
	if m.Type != t || len(m.Labels) > 0 {
		panic("selfmetric: " + m.Name + " is a " + string(m.Type) + " with labels [" + strings.Join(m.Labels, ",") + "], not a " + string(t) + " without")
	}
}

// The self-metrics of each source (bridge.Collector), labelled with the
// source's name.
var (
	SourceUp = Metric{"pcp_exporter_source_up", Gauge, []string{"source", "reason"},
		"1 when the PCP source is up and its last read succeeded; 0 with the reason (missing, stalled, ended, down, error) when not."}
	SourceLag = Metric{"pcp_exporter_source_lag_seconds", Gauge, []string{"source"},
		"How far the values served from a followed source are behind real time."}
	SourceServed = Metric{"pcp_exporter_source_served_timestamp_seconds", Gauge, []string{"source"},
		"The archive time (to the microsecond) whose values the last read of a replayed or followed source served."}
	SourceFetchDuration = Metric{"pcp_exporter_source_fetch_duration_seconds", Gauge, []string{"source"},
		"Time the last read of the PCP source took."}
	SourceErrors = Metric{"pcp_exporter_source_errors_total", Counter, []string{"source"},
		"Failed reads of the PCP source."}
	MetricsSkipped = Metric{"pcp_exporter_metrics_skipped", Gauge, []string{"source", "reason"},
		"PCP metrics of the source not exported, by reason."}
	MetricsExported = Metric{"pcp_exporter_metrics_exported", Gauge, []string{"source"},
		"PCP metrics of the source exported as metric families."}
	MetricErrors = Metric{"pcp_exporter_pmcd_metric_errors", Gauge, []string{"source", "code"},
		"Metrics pmcd answered with an error at the last fetch (skipped), by PCP error code."}
	MetricErrorsTotal = Metric{"pcp_exporter_pmcd_metric_errors_total", Counter, []string{"source"},
		"Metric values pmcd answered with an error (skipped)."}
	MMVFiles = Metric{"pcp_exporter_mmv_files", Gauge, []string{"source", "exported"},
		"MMV files seen in the directory, by whether they are exported."}
	LabelsMalformed = Metric{"pcp_exporter_labels_malformed", Gauge, []string{"source"},
		"Labels of the source's metrics and instances left out as malformed (the rest are served)."}
	SeriesLimit = Metric{"pcp_exporter_series_limit", Gauge, []string{"source"},
		"The source's limit on the values of a read and the instances of an instance domain (0: none)."}
	SeriesLeftOut = Metric{"pcp_exporter_series_left_out", Gauge, []string{"source", "what"},
		"Values (what) of the last read, and instances of the instance domains, left out by the series limit."}
)

// The self-metrics of serve itself.
var (
	ReloadSuccessful = Metric{"pcp_exporter_config_last_reload_successful", Gauge, nil,
		"Whether the last configuration reload (mapping and derived metrics) succeeded."}
	ReloadSuccessTime = Metric{"pcp_exporter_config_last_reload_success_timestamp_seconds", Gauge, nil,
		"Timestamp of the last successful configuration load."}
	OTLPExportErrors = Metric{"pcp_exporter_otlp_export_errors_total", Counter, nil,
		"OTLP pushes that failed (after the exporter's retries)."}
)

// The self-metrics of /probe (serve --pmcd.config).
var (
	ProbeTargets = Metric{"pcp_exporter_probe_targets", Gauge, nil,
		"Targets in /probe's pool (connections and metadata kept between probes; probe.max_targets bounds them)."}
	ProbeTargetsOpened = Metric{"pcp_exporter_probe_targets_opened_total", Counter, nil,
		"Targets added to /probe's pool (a target closed when idle or to make room is opened again at its next probe)."}
	Probes = Metric{"pcp_exporter_probes_total", Counter, []string{"outcome"},
		"Probes of /probe by outcome: answered (pcp_probe_success 1), failed (pcp_probe_success 0: pmcd down, or its metadata not read within the probe's timeout), refused (HTTP 503: a limit, see pcp_exporter_probe_refused_total)."}
	ProbeRefused = Metric{"pcp_exporter_probe_refused_total", Counter, []string{"limit"},
		"Probes refused with HTTP 503 by a limit of probe: max_concurrent (no probe ended within the probe's timeout) or max_targets (the pool full of targets being probed)."}
)

// The metrics of a backfill run, written for node_exporter's textfile
// collector (backfill --metrics.textfile), labelled with the file's name.
var (
	BackfillSuccess = Metric{"pcp_exporter_backfill_last_run_success", Gauge, []string{"backfill"},
		"1 when the last backfill run wrote every sample it read, 0 when it failed, was interrupted, or samples were rejected or not sent."}
	BackfillTimestamp = Metric{"pcp_exporter_backfill_last_run_timestamp_seconds", Gauge, []string{"backfill"},
		"When the last backfill run ended."}
	BackfillDuration = Metric{"pcp_exporter_backfill_last_run_duration_seconds", Gauge, []string{"backfill"},
		"How long the last backfill run took."}
	BackfillLastSuccess = Metric{"pcp_exporter_backfill_last_success_timestamp_seconds", Gauge, []string{"backfill"},
		"When the last backfill run that wrote every sample it read ended."}
	BackfillSamples = Metric{"pcp_exporter_backfill_last_run_samples", Gauge, []string{"backfill", "outcome"},
		"Samples of the last backfill run by outcome: read from the archives, written (accepted by the destination), rejected by it, not sent (the run stopped), sent without an answer, possibly duplicated (sent again after a lost answer)."}
	BackfillRejected = Metric{"pcp_exporter_backfill_last_run_rejected_samples", Gauge, []string{"backfill", "reason"},
		"Samples of the last backfill run the destination rejected, by its reason (out of order, out of bounds, too old, duplicate sample, HTTP status)."}
	BackfillSkipped = Metric{"pcp_exporter_backfill_last_run_skipped", Gauge, []string{"backfill", "reason"},
		"What the last backfill run did not turn into samples, by reason: metrics the mapping skips (metric_ and the mapping's reason) and value sets an archive records as a PCP error (error: and its text)."}
)

// NewGaugeVec returns the metric as a gauge vector with its labels.
func (m *Metric) NewGaugeVec() *prometheus.GaugeVec {
	if m.Type != Gauge {
		panic("selfmetric: " + m.Name + " is a " + string(m.Type) + ", not a gauge")
	}
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: m.Name, Help: m.Help}, m.Labels)
}

// All is every self-metric, in the order the README lists them.
var All = []*Metric{
	&SourceUp, &SourceLag, &SourceServed, &SourceFetchDuration, &SourceErrors,
	&MetricsSkipped, &MetricsExported, &MetricErrors, &MetricErrorsTotal, &MMVFiles,
	&LabelsMalformed, &SeriesLimit, &SeriesLeftOut,
	&ReloadSuccessful, &ReloadSuccessTime, &OTLPExportErrors,
	&ProbeTargets, &ProbeTargetsOpened, &Probes, &ProbeRefused,
	&BackfillSuccess, &BackfillTimestamp, &BackfillDuration, &BackfillLastSuccess,
	&BackfillSamples, &BackfillRejected, &BackfillSkipped,
}
