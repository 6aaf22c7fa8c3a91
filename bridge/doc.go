// Package bridge connects PCP sources to their consumers: a Prometheus
// collector over any source.Source (live MMV files, archive replays, derived
// metrics), mapped with package mapping, plus the exporter's own metrics
// (per source: up, fetch duration, errors, MMV files, metrics skipped by
// reason). It owns when sources are read and how their values become
// samples; it knows nothing of PCP file formats.
//
// The parts:
//
//   - collector.go: Collector, the one reader of the sources: once per
//     scrape or push it reads every source (remapping a source whose
//     metrics changed) and hands each value, with its Prometheus or its
//     OpenTelemetry family, to a visitor; as a prometheus.Collector it sends const metrics, for the
//     protobuf format and for scrapes that select families (name[]).
//   - reading.go: the same read for a caller that chooses the times
//     (backfill's replay on a grid): ReadAt hands each value with its
//     family, instance and counter generation; ReadOptions select the
//     families read and the namespace.
//   - text.go: the fast path of /metrics, WriteText and WriteOpenMetrics,
//     which write the same read straight into the text format 0.0.4 or
//     OpenMetrics 1.0.0 with each series' label block cached between
//     scrapes, and a _created sample for counters whose start is known.
//   - exposition.go: the one encoder of both text formats (headers, label
//     blocks, escaping, numbers, _created), line for line as client_golang's
//     expfmt writes them, shared with the OpenMetrics backfill; and
//     CounterStart, the start of a cumulative series, shared with OTLP.
//   - handler.go: the /metrics handler: promhttp's content negotiation and
//     options, the fast path for text and OpenMetrics (what Prometheus asks
//     for), concurrent scrapes coalesced into one rendering, gzip as
//     negotiated.
//   - otel.go: OTelProducer, the Collector's read mapped by the mapper's
//     OTel form (mapping.Mapper.OTel), one resource per host, and
//     OTelBatch, the one OTLP encoding of the push and the OTLP backfill
//     (cumulative sums with start times).
//   - otlp.go: OTLPConfig, the OTLP exporter (grpc or http/protobuf, TLS,
//     headers, retries) of serve's push and backfill's OTLP sink, and the
//     periodic push of an OTelProducer's reads.
//   - reload.go: Reconfigure, a new mapper and derived metrics swapped
//     into a collector (and so into its push) between two reads.
//   - replayclock.go: the clock that maps wall time into an archive replay.
//
// Package bridge/httpd is the HTTP server these handlers are served on.
//
// Why the fast path exists: client_golang's Gather builds a dto.Metric per
// value and expfmt then encodes them: for 100,000 series, 2.4 million
// allocations and 100 MB per scrape, where the fast path makes about 50
// allocations (none per series) in 1/20 to 1/60 of the time
// (BenchmarkClientGolangOpenMetrics against BenchmarkWriteOpenMetrics;
// bench/scrape/run.sh against pmproxy, in docs/performance.md). Tests keep
// the two paths equal line for line (TestWriteTextMatchesClientGolang,
// TestWriteOpenMetricsMatchesClientGolang).
package bridge
