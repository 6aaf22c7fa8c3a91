package backfill

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pcp-exporter/pcp-exporter/internal/selfmetric"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// A batch job's metrics, as Prometheus users expect them of one: a file for
// node_exporter's textfile collector (--collector.textfile.directory),
// written whole at the end of every run (a temporary file renamed, so the
// collector never reads half of one). The gauges describe the last run;
// the last success's time carries over from the file's previous content
// when a run fails.

// TextfileSuffix is the suffix node_exporter's textfile collector reads.
const TextfileSuffix = ".prom"

// CheckTextfile says what is wrong with a path for the run's metrics: it
// must end with .prom (node_exporter reads no other file) in a directory
// that exists.
func CheckTextfile(path string) error {
	if !strings.HasSuffix(path, TextfileSuffix) || len(filepath.Base(path)) == len(TextfileSuffix) {
		return fmt.Errorf("%s: want a NAME.prom file (node_exporter's textfile collector reads only those)", path)
	}
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || !fi.IsDir() {
		return fmt.Errorf("%s: its directory does not exist", path)
	}
	return nil
}

// TextfileName is the value of the backfill label of a textfile's series:
// the file's name without .prom (one file per backfill job).
func TextfileName(path string) string {
	return strings.TrimSuffix(filepath.Base(path), TextfileSuffix)
}

var lastSuccessName = selfmetric.BackfillLastSuccess.Name

// WriteTextfile writes the metrics of a run that began at start and ended
// at end with err (nil: every sample read was written) into path.
func WriteTextfile(path string, st Stats, start, end time.Time, err error) error {
	name := TextfileName(path)
	ok := err == nil && st.Rejected == 0 && st.Unsent == 0 && st.Unanswered == 0
	lastSuccess, found := previousSuccess(path, name)
	if ok {
		lastSuccess, found = float64(end.UnixMilli())/1000, true
	}
	reg := prometheus.NewPedanticRegistry()
	gauge := func(m *selfmetric.Metric) *prometheus.GaugeVec {
		g := m.NewGaugeVec()
		reg.MustRegister(g)
		return g
	}
	success := 0.0
	if ok {
		success = 1
	}
	gauge(&selfmetric.BackfillSuccess).WithLabelValues(name).Set(success)
	gauge(&selfmetric.BackfillTimestamp).WithLabelValues(name).Set(float64(end.UnixMilli()) / 1000)
	gauge(&selfmetric.BackfillDuration).WithLabelValues(name).Set(end.Sub(start).Seconds())
	if found {
		gauge(&selfmetric.BackfillLastSuccess).WithLabelValues(name).Set(lastSuccess)
	}
	samples := gauge(&selfmetric.BackfillSamples)
	for outcome, n := range map[string]int64{"read": st.Read, "written": st.Written, "rejected": st.Rejected, "unsent": st.Unsent, "unanswered": st.Unanswered, "duplicated": st.Duplicated} {
		samples.WithLabelValues(name, outcome).Set(float64(n))
	}
	rejected := gauge(&selfmetric.BackfillRejected)
	for reason, n := range st.RejectedBy {
		rejected.WithLabelValues(name, reason).Set(float64(n))
	}
	skipped := gauge(&selfmetric.BackfillSkipped)
	for reason, n := range st.Skipped {
		skipped.WithLabelValues(name, reason).Set(float64(n))
	}
	if werr := prometheus.WriteToTextfile(path, reg); werr != nil {
		return fmt.Errorf("--metrics.textfile: %w", werr)
	}
	return nil
}

// previousSuccess reads the last success's time from the file a former
// run wrote (none when it has none or cannot be read).
func previousSuccess(path, name string) (float64, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(f)
	if err != nil {
		return 0, false
	}
	mf := mfs[lastSuccessName]
	if mf == nil {
		return 0, false
	}
	for _, m := range mf.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "backfill" && l.GetValue() == name && m.GetGauge() != nil {
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}
