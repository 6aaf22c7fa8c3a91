package main

import (
	"encoding/json"
	"io"
	"os"

	"github.com/alecthomas/kingpin/v2"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
)

// metadataSource is what info needs of a source: archives and MMV sources
// both provide it.
type metadataSource interface {
	Metrics() []source.Metric
	Instances(indom semantics.InDom) []source.Instance
}

func infoCommand() command {
	return command{
		name: "info",
		help: "Print the metadata of archives, MMV files or a pmcd as JSON.",
		setup: func(cmd *kingpin.CmdClause) func() error {
			paths := cmd.Arg("source", "Archives: base names, files of an archive, or directories of archives.").Strings()
			mf := addMMVFlags(cmd, false)
			dflags := addDerivedFlags(cmd)
			pf := addPMCDFlags(cmd, false)
			return func() error {
				if len(*paths) == 0 && mf.path == "" && len(pf.specs) == 0 {
					return usagef("info: name at least one source")
				}
				o, err := openOnce(&onceFlags{pmcd: pf, mmv: mf, archives: paths, apart: true}, "pmcd", "mmv", "archive")
				if err != nil {
					return err
				}
				defer o.close()
				srcs := make([]metadataSource, len(o.srcs))
				for i, s := range o.srcs {
					srcs[i] = s.Src
				}
				for i, src := range srcs {
					ms, err := dflags.describe(src.Metrics(), nil)
					if err != nil {
						return err
					}
					srcs[i] = describedSource{src, ms}
				}
				return writeInfo(os.Stdout, srcs...)
			}
		},
	}
}

// describedSource is a source whose metric list includes the derived
// metrics of --derived.config.
type describedSource struct {
	metadataSource
	metrics []source.Metric
}

func (d describedSource) Metrics() []source.Metric { return d.metrics }

type infoInstance struct {
	ID     int32           `json:"id"`
	Name   string          `json:"name"`
	Labels json.RawMessage `json:"labels"`
}

type infoMetric struct {
	Name      string          `json:"name"`
	PMID      string          `json:"pmid"`
	Type      string          `json:"type"`
	Sem       string          `json:"sem"`
	InDom     *string         `json:"indom"`
	Units     string          `json:"units"`
	OneLine   string          `json:"oneline"`
	Help      string          `json:"help"`
	Labels    json.RawMessage `json:"labels"`
	Instances []infoInstance  `json:"instances"`
}

// infoMetrics builds the info objects of one source, in its metric order.
func infoMetrics(src metadataSource) []infoMetric {
	var out []infoMetric
	for _, m := range src.Metrics() {
		im := infoMetric{
			Name:      m.Name,
			PMID:      m.Desc.PMID.String(),
			Type:      m.Desc.Type.String(),
			Sem:       m.Desc.Sem.String(),
			Units:     m.Desc.Units.String(),
			OneLine:   m.OneLine,
			Help:      m.Help,
			Labels:    m.Labels.AppendJSON(nil),
			Instances: []infoInstance{},
		}
		if m.Desc.InDom != semantics.InDomNull {
			s := m.Desc.InDom.String()
			im.InDom = &s
			for _, in := range src.Instances(m.Desc.InDom) {
				im.Instances = append(im.Instances, infoInstance{ID: in.ID, Name: in.Name, Labels: in.Labels.AppendJSON(nil)})
			}
		}
		out = append(out, im)
	}
	return out
}

func writeInfo(w io.Writer, srcs ...metadataSource) error {
	all := []infoMetric{}
	for _, s := range srcs {
		all = append(all, infoMetrics(s)...)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(all)
}
