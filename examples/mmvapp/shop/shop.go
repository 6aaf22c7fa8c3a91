// Package shop is the instrumentation of the example application
// (examples/mmvapp): the layout of its MMV file and the simulated traffic that
// updates it through mmvwrite.Writer. It is a package of its own so that the
// examples' tests can reuse the layout (derived metrics and mapping examples).
package shop

import (
	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source/mmv/mmvwrite"
)

// Version is the application version published as mmv.mmvapp.version.
const Version = "1.4.2"

// Endpoints are the instances of the endpoint instance domain, in id order.
var Endpoints = []string{"/", "/cart", "/checkout"}

const (
	RequestMillis = 12.5 // simulated time per request
	RequestKbytes = 2    // simulated bytes sent per request, in Kbyte
)

// Config returns the MMV file layout of the application.
func Config() mmvwrite.Config {
	inst := make([]mmvwrite.InstanceDef, len(Endpoints))
	for i, e := range Endpoints {
		inst[i] = mmvwrite.InstanceDef{ID: int32(i), Name: e}
	}
	count := semantics.Units{DimCount: 1}
	msec := semantics.Units{DimTime: 1, ScaleTime: semantics.TimeMSec}
	kbyte := semantics.Units{DimSpace: 1, ScaleSpace: semantics.SpaceKByte}
	return mmvwrite.Config{
		// PROCESS: readers export the file only while this process lives,
		// and Close removes it (mmv_stats_start with MMV_FLAG_PROCESS).
		Flags:  mmvwrite.FlagProcess,
		InDoms: []mmvwrite.InDomDef{{Serial: 1, Instances: inst, OneLine: "HTTP endpoints", Help: "The endpoints the shop serves."}},
		Metrics: []mmvwrite.MetricDef{
			{Name: "requests", Item: 1, Type: mmvwrite.TypeU64, Sem: semantics.SemCounter, Units: count, InDom: 1,
				OneLine: "requests served", Help: "Number of HTTP requests served, by endpoint."},
			{Name: "request_time", Item: 2, Type: mmvwrite.TypeDouble, Sem: semantics.SemCounter, Units: msec, InDom: 1,
				OneLine: "time spent serving requests", Help: "Total time spent serving requests, by endpoint."},
			{Name: "sent", Item: 3, Type: mmvwrite.TypeU64, Sem: semantics.SemCounter, Units: kbyte, InDom: 1,
				OneLine: "data sent", Help: "Response bytes sent, by endpoint, in Kbyte."},
			{Name: "in_flight", Item: 4, Type: mmvwrite.TypeU32, Sem: semantics.SemInstant, Units: count,
				OneLine: "requests in progress"},
			{Name: "version", Item: 5, Type: mmvwrite.TypeString, Sem: semantics.SemDiscrete,
				OneLine: "application version"},
		},
	}
}

// App holds the value handles of a running application.
type App struct {
	w                    *mmvwrite.Writer
	requests, time, sent []mmvwrite.Handle
	inFlight             mmvwrite.Handle
	ticks                int
}

// New creates the MMV file at path and publishes the initial values.
func New(path string) (*App, error) {
	w, err := mmvwrite.New(path, Config())
	if err != nil {
		return nil, err
	}
	a := &App{w: w}
	for _, e := range Endpoints {
		a.requests = append(a.requests, w.MustHandle("requests", e))
		a.time = append(a.time, w.MustHandle("request_time", e))
		a.sent = append(a.sent, w.MustHandle("sent", e))
	}
	a.inFlight = w.MustHandle("in_flight", "")
	if err := w.MustHandle("version", "").SetString(Version); err != nil {
		w.Close()
		return nil, err
	}
	return a, nil
}

// Tick simulates one interval of traffic: endpoint i serves i+1 requests.
func (a *App) Tick() {
	for i := range Endpoints {
		n := uint64(i + 1)
		a.inFlight.SetUint64(n)
		a.requests[i].Add(float64(n))
		a.time[i].Add(float64(n) * RequestMillis)
		a.sent[i].Add(float64(n * RequestKbytes))
	}
	a.inFlight.SetUint64(0)
	a.ticks++
}

// Ticks returns the number of ticks simulated so far.
func (a *App) Ticks() int {
	return a.ticks
}

// Close unmaps and removes the file (the PROCESS flag, as mmv_stats_stop).
// After a crash the file stays, and pmdammv and pcp-exporter ignore it
// because its writer's PID is gone.
func (a *App) Close() error { return a.w.Close() }
