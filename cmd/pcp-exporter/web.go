package main

import (
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/pcp-exporter/pcp-exporter/bridge/httpd"
)

// addHTTPFlags adds the limits of serve's HTTP server, named as Prometheus
// names its own (--web.read-timeout, --web.max-connections) and
// VictoriaMetrics its idle timeout (-http.idleConnTimeout).
func addHTTPFlags(cmd *kingpin.CmdClause) *httpd.Config {
	c := &httpd.Config{}
	cmd.Flag("web.read-timeout", "Maximum time to read a request, headers and body (0: no limit).").Default("30s").DurationVar(&c.ReadTimeout)
	cmd.Flag("web.write-timeout", "Maximum time from the end of a request's headers to the end of its response: a client that does not read a scrape is cut off then (0: no limit; keep it above the slowest scrape).").Default("2m").DurationVar(&c.WriteTimeout)
	cmd.Flag("web.idle-timeout", "Time an idle keep-alive connection stays open (0: the read timeout).").Default("1m").DurationVar(&c.IdleTimeout)
	cmd.Flag("web.max-connections", "Maximum number of simultaneous connections across all listeners: a connection beyond it closes the one idle longest (or itself when none is idle), so idle clients cannot keep others out (0: no limit).").Default("512").IntVar(&c.MaxConns)
	cmd.Flag("web.health-timeout", "/-/healthy fails (and Kubernetes restarts the pod) when a read of the sources cannot take their locks within this time, or a scrape has run this long past --web.write-timeout.").Default("30s").DurationVar(&c.HealthTimeout)
	return c
}

// checkHTTP rejects negative limits, naming the flag and the value.
func checkHTTP(c *httpd.Config) error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"web.read-timeout", c.ReadTimeout}, {"web.write-timeout", c.WriteTimeout}, {"web.idle-timeout", c.IdleTimeout}} {
		if d.v < 0 {
			return usagef("--%s=%v: want a duration of 0 or more", d.name, d.v)
		}
	}
	if c.MaxConns < 0 {
		return usagef("--web.max-connections=%d: want 0 (no limit) or more", c.MaxConns)
	}
	if c.HealthTimeout <= 0 {
		return usagef("--web.health-timeout=%v: want a positive duration", c.HealthTimeout)
	}
	return nil
}
