// pcp-exporter's monitoring mixin: alerts on the exporter's health, recording
// rules and pmieconf-derived alerts for PCP hosts, and Grafana dashboards.
// Render with `make` in this directory (rendered/ holds the result).
(import 'config.libsonnet') +
(import 'alerts/health.libsonnet') +
(import 'alerts/host.libsonnet') +
(import 'rules/host.libsonnet') +
(import 'dashboards/dashboards.libsonnet')
