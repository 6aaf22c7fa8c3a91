package pmcd

import (
	"encoding/json"
	"os/exec"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/internal/e2e"
)

// lookupTextPy prints, as JSON, libpcp's pmLookupText(PM_TEXT_ONELINE) and
// pmLookupText(PM_TEXT_HELP) of the metrics of the local pmcd under
// helpSubtrees (name -> [one-line, help]; an error is "").
const lookupTextPy = `
import json, sys, cpmapi
from pcp import pmapi
c = pmapi.pmContext(cpmapi.PM_CONTEXT_HOST, "local:")
names = []
for top in sys.argv[1:]:
    c.pmTraversePMNS(top, names.append)
out = {}
for n in names:
    try:
        pmid = c.pmLookupName(n)[0]
    except pmapi.pmErr:
        continue
    t = []
    for level in (cpmapi.PM_TEXT_ONELINE, cpmapi.PM_TEXT_HELP):
        try:
            t.append(c.pmLookupText(pmid, level).decode("utf-8", "replace"))
        except pmapi.pmErr:
            t.append("")
    out[n] = t
print(json.dumps(out))
`

// helpSubtrees are the subtrees compared with pmLookupText (every metric
// would take a minute on a loaded machine; info --pmcd's comparison with
// pminfo -T covers them all): pmcd's own metrics and the Linux PMDA's,
// where both kinds of help are common.
var helpSubtrees = []string{"pmcd", "kernel.all", "mem.util", "disk.dev"}

// TestHelpTextMatchesPmLookupText: the OneLine and Help of the metrics
// under helpSubtrees, read from the local pmcd, are what libpcp's pmLookupText answers for
// PM_TEXT_ONELINE and PM_TEXT_HELP. libpcp answers the one-line text for
// PM_TEXT_HELP where pmcd has no long text (help.c, fallbacktext): on a
// stock host that is about half of pmcd's metrics (kernel.all.load, ...).
func TestHelpTextMatchesPmLookupText(t *testing.T) {
	e2e.Require(t, "pminfo")
	e2e.LockPMCD(t, false)
	py := "/usr/bin/python3"
	if out, err := exec.Command(py, "-c", "import cpmapi").CombinedOutput(); err != nil {
		if e2e.Mandatory() {
			t.Fatalf("python3-pcp: %v\n%s", err, out)
		}
		t.Skipf("python3-pcp not installed: %v", err)
	}
	s, err := Open("local:", Options{Timeout: 10 * time.Second, Selection: Selection{Include: helpSubtrees}})
	if err != nil {
		if e2e.Mandatory() {
			t.Fatalf("local pmcd: %v", err)
		}
		t.Skipf("no local pmcd: %v", err)
	}
	defer s.Close()
	ms := s.Metrics()
	out, err := exec.Command(py, append([]string{"-c", lookupTextPy}, helpSubtrees...)...).Output()
	if err != nil {
		t.Fatalf("pmLookupText: %v", err)
	}
	var want map[string][2]string
	if err := json.Unmarshal(out, &want); err != nil {
		t.Fatal(err)
	}
	compared, fallback, bad := 0, 0, 0
	for _, m := range ms {
		w, ok := want[m.Name]
		if !ok {
			continue // a metric gone meanwhile (an MMV file of another process)
		}
		compared++
		if w[1] == w[0] && w[0] != "" {
			fallback++
		}
		if m.OneLine != w[0] || m.Help != w[1] {
			if bad++; bad <= 10 {
				t.Errorf("%s: one-line %q help %q; pmLookupText %q %q", m.Name, m.OneLine, m.Help, w[0], w[1])
			}
		}
	}
	if bad > 10 {
		t.Errorf("... %d metrics differ in all", bad)
	}
	if compared < 100 || fallback < 20 {
		t.Errorf("only %d metrics compared, %d with the one-line fallback", compared, fallback)
	}
	t.Logf("%d metrics compared with pmLookupText (%d answer the one-line text for PM_TEXT_HELP)", compared, fallback)
}
