package pcplog

import "github.com/pcp-exporter/pcp-exporter/source/archive/internal/readhooks"

// What the replay's tests set and observe of the reading, reached through
// readhooks (none of it is pcplog's API).
func init() {
	readhooks.MinWindow = &minWindow
	readhooks.TailsWaitAll = &tailsWaitAll
	readhooks.RunsRefused, readhooks.TailsUsed, readhooks.TailsMissed = &runsRefused, &tailsUsed, &tailsMissed
}
