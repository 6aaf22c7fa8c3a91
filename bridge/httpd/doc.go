// Package httpd owns the exporter's HTTP server around the handlers of
// package bridge: its timeouts and connection limit (Config.Server), its
// listeners (addresses, vsock:// addresses or systemd's sockets: Listen),
// serving until a context ends (Serve), the log of refused credentials
// (LogFailedLogins), the server's own errors as structured lines, once per
// cause (ErrorLog), the read-only method check (GetOnly), liveness and
// readiness (Watchdog, Readiness) and configuration reloads on SIGHUP and
// POST /-/reload (Reloader). TLS and basic authentication are the
// Prometheus exporter-toolkit's, whose flags it takes.
//
// It knows nothing of PCP, its sources or their formats: what a health
// probe, a readiness read or a reload does is a function given to it.
package httpd
