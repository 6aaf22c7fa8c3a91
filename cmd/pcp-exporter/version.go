package main

import (
	"regexp"
	"runtime/debug"

	"github.com/prometheus/common/version"

	"github.com/pcp-exporter/pcp-exporter/bridge"
)

func init() {
	bi, _ := debug.ReadBuildInfo()
	stampVersion(bi)
	bridge.Scope.Version = version.Version // the OTLP scope's version
}

// pseudoRevision is the commit abbreviation ending a pseudo-version
// (v0.0.0-20261127152312-fd65d31790db, optionally +dirty).
var pseudoRevision = regexp.MustCompile(`-(?:\d+\.)?\d{14}-([0-9a-f]{12})(?:\+dirty)?$`)

// stampVersion fills the version and revision that the Makefile's ldflags
// stamp when a binary was built without them (go build, go install, go
// run) from what Go embeds: the main module's version (a tag, a
// pseudo-version, or "(devel)"), vcs.revision and vcs.modified (as
// "-modified"), else the commit a pseudo-version names.
func stampVersion(bi *debug.BuildInfo) {
	if bi == nil {
		return
	}
	if version.Version == "" {
		version.Version = bi.Main.Version
	}
	if version.Revision != "" {
		return
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "-modified"
			}
		}
	}
	if rev == "" {
		if m := pseudoRevision.FindStringSubmatch(bi.Main.Version); m != nil {
			rev = m[1]
		}
	}
	if rev != "" {
		version.Revision = rev + modified
	}
}
