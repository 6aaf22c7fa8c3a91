package mmv

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source/mmv/internal/mmvcorpus"
)

// corpusConfigs are the definitions of the corpus files.
var corpusConfigs = mmvcorpus.Configs

const (
	semCounter  = semantics.SemCounter
	semInstant  = semantics.SemInstant
	semDiscrete = semantics.SemDiscrete
)

// mapped maps the file at path shared and writable, as a writer's mapping:
// tests change its header under the readers.
func mapped(t testing.TB, path string) []byte {
	t.Helper()
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	b, err := unix.Mmap(fd, 0, int(st.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(b) })
	return b
}
