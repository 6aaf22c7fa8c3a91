// Package test checks the Helm chart in deploy/helm/pcp-exporter: it renders
// every ci/*-values.yaml with the real helm binary, decodes each manifest
// strictly (unknown fields are errors) into the Kubernetes API types and the
// prometheus-operator monitoring/v1 types, and checks what the chart promises:
// the sidecar's security context, volumes and args in every mode.
//
// It is a separate Go module so that the Kubernetes dependencies stay out of
// the pcp-exporter binary's module graph.
package test
