// Package mixin is pcp-exporter's monitoring mixin: jsonnet that renders
// Prometheus alerts on the exporter's health, recording rules and alerts for
// PCP hosts derived from pmieconf's rules, and Grafana dashboards (rendered/,
// committed; `make mixin` renders them again). It has no Go code but its
// tests, which check the rendered files with promtool, a Grafana dashboard
// JSON schema and a real Prometheus scraping the exporter.
package mixin
