package mapping

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/pcp-exporter/pcp-exporter/semantics"
)

// Config is a mapping configuration file:
//
//	naming: default          # or pmproxy, node, hostmetrics
//	instid: false            # also add the instance id as label instid (default naming)
//	include: ["mmv.app.*"]   # only metrics matching one of these (all when empty)
//	exclude: ["mmv.control.*", "/^kernel\\.percpu\\./"]
//	rename:
//	  - match: "/^kernel\\.all\\.(.*)$/"
//	    name: "node_$1"      # base name; unit suffix and _total are still added
//	drop_labels: [machineid]
//	keep_labels: []          # when set, only these labels are kept
//	full_labels: false       # every PCP label on every series, no target_info
//	series_labels: [device_type] # kept on every series with lean labels
//	with: [mem.slabinfo]     # turn on what the lean default leaves out (LeanDefault)
//
// A pattern is a metric name, which selects the metric and its subtree as
// pminfo does ("kernel.percpu" is kernel.percpu.cpu.user and the rest), a
// glob over the whole name ("*" any run of characters, dots included, as
// pmproxy's fnmatch; "?" one character; "[...]" a class), the rule of
// --pmcd.metrics and ?names= too (semantics.MatchMetricName), or a regular
// expression between slashes. Label lists name the labels as
// exposed (after sanitizing).
type Config struct {
	Naming     string    `yaml:"naming"`
	InstID     bool      `yaml:"instid"`
	Include    []Pattern `yaml:"include"`
	Exclude    []Pattern `yaml:"exclude"`
	Rename     []Rename  `yaml:"rename"`
	DropLabels []string  `yaml:"drop_labels"`
	KeepLabels []string  `yaml:"keep_labels"`
	// FullLabels puts every PCP label on every series (no target_info), as
	// before lean labels.
	FullLabels bool `yaml:"full_labels"`
	// SeriesLabels are PCP labels (sanitized names) that lean series keep
	// although they are the same on every series of a family (device_type).
	SeriesLabels []string `yaml:"series_labels"`
	// With turns on LeanDefault entries (lean.go).
	With []string `yaml:"with"`
}

// Rename gives the metrics matching Match the base name Name; with a regular
// expression, $1 and ${name} expand to its groups.
type Rename struct {
	Match Pattern `yaml:"match"`
	Name  string  `yaml:"name"`
	line  int
}

// Pattern is a metric name pattern (semantics.MatchMetricName: a name and
// its subtree, or a glob) or a /regexp/ over PCP metric names.
type Pattern struct {
	Text string
	re   *regexp.Regexp // a /regexp/'s; nil for a name or glob
	line int
}

// ParsePattern checks a name pattern or compiles a /regexp/.
func ParsePattern(s string) (Pattern, error) {
	p := Pattern{Text: s}
	if len(s) >= 2 && s[0] == '/' && s[len(s)-1] == '/' {
		re, err := regexp.Compile(s[1 : len(s)-1])
		if err != nil {
			return p, fmt.Errorf("bad regular expression %q: %w", s, err)
		}
		p.re = re
		return p, nil
	}
	if err := semantics.CheckMetricPattern(s); err != nil {
		return p, err
	}
	return p, nil
}

// Match reports whether the PCP name matches.
func (p *Pattern) Match(name string) bool {
	if p.re != nil {
		return p.re.MatchString(name)
	}
	return p.Text != "" && semantics.MatchMetricName(p.Text, name)
}

// UnmarshalYAML decodes and compiles a pattern, remembering its line.
func (p *Pattern) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return err
	}
	q, err := ParsePattern(s)
	if err != nil {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %v", n.Line, err)}}
	}
	q.line = n.Line
	*p = q
	return nil
}

// MarshalYAML writes the pattern's text.
func (p Pattern) MarshalYAML() (any, error) { return p.Text, nil }

// UnmarshalYAML decodes a rename rule strictly (unknown keys are errors;
// yaml.v3's Node.Decode has no KnownFields option) and remembers its line.
func (r *Rename) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: a rename rule is a mapping with match and name", n.Line)}}
	}
	var v Rename
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		var err error
		switch k.Value {
		case "match":
			err = val.Decode(&v.Match)
		case "name":
			err = val.Decode(&v.Name)
		default:
			err = &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: field %s not found in rename rule", k.Line, k.Value)}}
		}
		if err != nil {
			return err
		}
	}
	v.line = n.Line
	*r = v
	return nil
}

// ParseConfig decodes a configuration strictly (unknown fields are errors)
// and checks it; errors name the line.
func ParseConfig(data []byte) (*Config, error) {
	var c Config
	d := yaml.NewDecoder(bytes.NewReader(data))
	d.KnownFields(true)
	if err := d.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return nil, yamlError(err)
	}
	var doc yaml.Node
	_ = yaml.Unmarshal(data, &doc)
	if _, err := ParseNaming(c.Naming); err != nil {
		return nil, fmt.Errorf("line %d: %v", keyLine(&doc, "naming"), err)
	}
	for _, r := range c.Rename {
		if r.Match.Text == "" {
			return nil, fmt.Errorf("line %d: rename rule without match", r.line)
		}
		if r.Name == "" {
			return nil, fmt.Errorf("line %d: rename rule without name", r.line)
		}
		if SanitizeMetricName(strings.NewReplacer("$", "", "{", "", "}", "").Replace(r.Name)) != strings.NewReplacer("$", "", "{", "", "}", "").Replace(r.Name) {
			return nil, fmt.Errorf("line %d: rename: %q is not a valid Prometheus metric name", r.line, r.Name)
		}
	}
	for _, kl := range []struct {
		key  string
		list []string
	}{{"drop_labels", c.DropLabels}, {"keep_labels", c.KeepLabels}, {"series_labels", c.SeriesLabels}} {
		key, list := kl.key, kl.list
		for _, l := range list {
			if SanitizeLabelName(l) != l {
				return nil, fmt.Errorf("line %d: %s: %q is not a valid label name", keyLine(&doc, key), key, l)
			}
		}
	}
	for _, w := range c.With {
		if !leanName(w) {
			return nil, fmt.Errorf("line %d: %v", keyLine(&doc, "with"), &withError{w})
		}
	}
	return &c, nil
}

// keyLine finds the line of a top-level key (0 when absent).
func keyLine(doc *yaml.Node, key string) int {
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return 0
	}
	m := doc.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i].Line
		}
	}
	return 0
}

// LoadConfig reads and parses a configuration file; errors start with the
// file name ("mapping.yml: line 3: ...").
func LoadConfig(file string) (*Config, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	c, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return c, nil
}

// yamlError puts a yaml.v3 error on one line: "line 3: field x not found in
// type mapping.Config; line 5: ...".
func yamlError(err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	msg = strings.TrimPrefix(msg, "unmarshal errors:\n  ")
	msg = strings.ReplaceAll(msg, "\n  ", "; ")
	return errors.New(msg)
}
