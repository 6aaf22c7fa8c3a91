// Alerts on pcp-exporter's own health (its self-metrics, README: Honest health).
{
  prometheusAlerts+:: {
    groups+: [{
      name: 'pcp-exporter-health',
      rules: [
        {
          alert: 'PCPExporterDown',
          expr: 'up{%(exporterSelector)s} == 0' % $._config,
          'for': $._config.healthFor,
          labels: { severity: 'critical' },
          annotations: {
            summary: 'pcp-exporter does not answer scrapes.',
            description: 'Prometheus cannot scrape pcp-exporter at {{ $labels.instance }} (job {{ $labels.job }}).',
          },
        },
        {
          alert: 'PCPExporterSourceDown',
          expr: 'pcp_exporter_source_up{%(exporterSelector)s, reason=~"down|missing|error"} == 0' % $._config,
          'for': $._config.healthFor,
          labels: { severity: 'warning' },
          annotations: {
            summary: 'A PCP source of pcp-exporter is down.',
            description: 'Source {{ $labels.source }} of {{ $labels.instance }} is down, reason "{{ $labels.reason }}" (down: pmcd does not answer; missing: the path names nothing; error: its last read failed).',
          },
        },
        {
          alert: 'PCPExporterSourceStalled',
          expr: 'pcp_exporter_source_up{%(exporterSelector)s, reason="stalled"} == 0' % $._config,
          'for': $._config.healthFor,
          labels: { severity: 'warning' },
          annotations: {
            summary: 'A followed PCP archive gets no new records.',
            description: 'The archive {{ $labels.source }} followed by {{ $labels.instance }} had no record for 3 logging intervals plus 2 s: is its pmlogger running?',
          },
        },
        {
          alert: 'PCPExporterReplayEnded',
          expr: 'pcp_exporter_source_up{%(exporterSelector)s, reason="ended"} == 0' % $._config,
          'for': $._config.healthFor,
          labels: { severity: 'info' },
          annotations: {
            summary: 'A replayed PCP archive has ended.',
            description: 'The replay of {{ $labels.source }} by {{ $labels.instance }} reached its end: its last values stay (use --replay.loop to start over).',
          },
        },
        {
          alert: 'PCPExporterArchiveLagging',
          expr: 'pcp_exporter_source_lag_seconds{%(exporterSelector)s} > %(archiveLagSeconds)s' % $._config,
          'for': $._config.healthFor,
          labels: { severity: 'warning' },
          annotations: {
            summary: 'A followed PCP archive is served far behind real time.',
            description: 'The values of {{ $labels.source }} served by {{ $labels.instance }} are {{ $value | humanizeDuration }} behind the wall clock.',
          },
        },
        {
          alert: 'PCPExporterPMCDMetricErrorsRising',
          expr: |||
            rate(pcp_exporter_pmcd_metric_errors_total{%(exporterSelector)s}[%(rateInterval)s])
              > 1.5 * rate(pcp_exporter_pmcd_metric_errors_total{%(exporterSelector)s}[%(rateInterval)s] offset 1h)
          ||| % $._config,
          'for': $._config.healthFor,
          labels: { severity: 'warning' },
          annotations: {
            summary: 'pmcd answers more metrics with errors than an hour ago.',
            description: 'pmcd ({{ $labels.source }}) answers {{ $value | humanize }} metric values per second with an error at {{ $labels.instance }}, more than 1.5 times as many as an hour ago (a PMDA died or lost its data?); pcp_exporter_pmcd_metric_errors tells the PCP error codes.',
          },
        },
        {
          alert: 'PCPExporterReloadFailed',
          expr: 'pcp_exporter_config_last_reload_successful{%(exporterSelector)s} == 0' % $._config,
          'for': $._config.healthFor,
          labels: { severity: 'warning' },
          annotations: {
            summary: 'pcp-exporter failed to reload its configuration.',
            description: 'The last reload of the mapping or derived-metrics file by {{ $labels.instance }} failed: it runs with the configuration it had (the log says the file and line).',
          },
        },
        {
          alert: 'PCPExporterSourceReadErrors',
          expr: 'increase(pcp_exporter_source_errors_total{%(exporterSelector)s}[%(rateInterval)s]) > 0' % $._config,
          'for': $._config.healthFor,
          labels: { severity: 'warning' },
          annotations: {
            summary: 'Scrapes of pcp-exporter fail to read a PCP source.',
            description: '{{ $value | humanize }} reads of {{ $labels.source }} by {{ $labels.instance }} failed in the last %(rateInterval)s.' % $._config,
          },
        },
        {
          alert: 'PCPExporterScrapeErrors',
          expr: 'increase(promhttp_metric_handler_errors_total{%(exporterSelector)s}[%(rateInterval)s]) > 0' % $._config,
          'for': $._config.healthFor,
          labels: { severity: 'warning' },
          annotations: {
            summary: 'pcp-exporter fails to write its self-metrics.',
            description: '{{ $value | humanize }} errors ({{ $labels.cause }}) writing the self-metrics of {{ $labels.instance }} in the last %(rateInterval)s.' % $._config,
          },
        },
        {
          alert: 'PCPExporterBackfillRejections',
          expr: 'pcp_exporter_backfill_last_run_samples{%(backfillSelector)s, outcome="rejected"} > 0' % $._config,
          'for': $._config.healthFor,
          labels: { severity: 'warning' },
          annotations: {
            summary: 'The last run of a pcp-exporter backfill had samples rejected.',
            description: 'The destination rejected {{ $value | humanize }} samples of the last run of backfill {{ $labels.backfill }} (node_exporter {{ $labels.instance }}); pcp_exporter_backfill_last_run_rejected_samples tells the reasons (out of bounds: older than the receiver accepts, write TSDB blocks instead).',
          },
        },
        {
          alert: 'PCPExporterOTLPExportErrors',
          expr: 'increase(pcp_exporter_otlp_export_errors_total{%(exporterSelector)s}[%(rateInterval)s]) > 0' % $._config,
          'for': $._config.healthFor,
          labels: { severity: 'warning' },
          annotations: {
            summary: 'pcp-exporter fails to push OTLP.',
            description: '{{ $value | humanize }} OTLP pushes of {{ $labels.instance }} failed in the last %(rateInterval)s (after the exporter retries).' % $._config,
          },
        },
      ],
    }],
  },
}
