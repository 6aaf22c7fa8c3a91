package bridge

import (
	"testing"

	"github.com/pcp-exporter/pcp-exporter/mapping"
)

// TestAppendLabels: the escaping both formats share (and the OpenMetrics
// backfill with them): backslash, newline and double quote in label
// values, invalid UTF-8 replaced by U+FFFD, the info value label in its
// sorted place.
func TestAppendLabels(t *testing.T) {
	for _, tc := range []struct {
		labels []mapping.LabelPair
		value  string
		want   string
	}{
		{nil, "", " "},
		{nil, "v", `{value="v"} `},
		{[]mapping.LabelPair{{Name: "a", Value: `q"b\s` + "\nn"}}, "", `{a="q\"b\\s\nn"} `},
		{[]mapping.LabelPair{{Name: "bad", Value: "x\xffy\xc3"}}, "", "{bad=\"x\uFFFDy\uFFFD\"} "},
		{[]mapping.LabelPair{{Name: "agent", Value: "mmv"}, {Name: "zone", Value: "z"}}, "s\xfe", "{agent=\"mmv\",value=\"s\uFFFD\",zone=\"z\"} "},
		{[]mapping.LabelPair{{Name: "agent", Value: "mmv"}}, "last", `{agent="mmv",value="last"} `},
	} {
		if got := string(AppendLabels(nil, tc.labels, tc.value)); got != tc.want {
			t.Errorf("AppendLabels(%q, %q) = %q, want %q", tc.labels, tc.value, got, tc.want)
		}
	}
	f := &mapping.Family{Name: "x_total", OMName: "x", Type: mapping.Counter, Help: "say \"hi\"\\\n\xff"}
	if got, want := string(AppendHeader(nil, f, true)), "# HELP x say \\\"hi\\\"\\\\\\n\uFFFD\n# TYPE x counter\n"; got != want {
		t.Errorf("OpenMetrics header %q, want %q", got, want)
	}
	if got, want := string(AppendHeader(nil, f, false)), "# HELP x_total say \"hi\"\\\\\\n\uFFFD\n# TYPE x_total counter\n"; got != want {
		t.Errorf("text header %q, want %q", got, want)
	}
}

// TestAppendFloat: numbers as client_golang writes them in each format.
func TestAppendFloat(t *testing.T) {
	for _, tc := range []struct {
		v        float64
		text, om string
	}{
		{0, "0", "0.0"}, {1, "1", "1.0"}, {-1, "-1", "-1.0"}, {42, "42", "42.0"},
		{2.5, "2.5", "2.5"}, {1e21, "1e+21", "1e+21"}, {1.7953378899914591e+09, "1.7953378899914591e+09", "1.7953378899914591e+09"},
	} {
		if got := string(AppendFloat(nil, tc.v, false)); got != tc.text {
			t.Errorf("text %v: %q, want %q", tc.v, got, tc.text)
		}
		if got := string(AppendFloat(nil, tc.v, true)); got != tc.om {
			t.Errorf("OpenMetrics %v: %q, want %q", tc.v, got, tc.om)
		}
	}
}
