package pcplog

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Archive discovery: what a path the user gave names. A path is an
// archive's base name or any of its files, a directory of archives (one
// per .meta file, as pmlogger leaves them: YYYYMMDD.HH.MM, older ones
// compressed by pmlogger_daily), or the root of a pmlogger farm (one
// directory of archives per host).

// IsArchivePath reports whether p names an existing file, directory or
// archive base name (p.meta, possibly compressed, exists).
func IsArchivePath(p string) bool {
	if _, err := os.Stat(p); err == nil {
		return true
	}
	_, err := findFile(p + ".meta")
	return err == nil
}

// NotFound is the error for a path that names no archive: it names the
// path as the user gave it.
func NotFound(path string) error {
	return fmt.Errorf("%s: no such archive or directory: %w", path, fs.ErrNotExist)
}

// InDir returns the base names of the archives in directory dir (one per
// .meta file, plain or compressed), in name order; none is not an error.
func InDir(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var names []string
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(strings.TrimSuffix(n, compressionOf(n)), ".meta") {
			continue
		}
		b := filepath.Join(dir, BaseName(n))
		if !seen[b] {
			seen[b] = true
			names = append(names, b)
		}
	}
	sort.Strings(names)
	return names, nil
}

// Find returns the base names of the archives path names: the archive
// itself, or every archive of a directory. An error names path as given.
func Find(path string) ([]string, error) {
	st, err := os.Stat(path)
	if err != nil || !st.IsDir() {
		if !IsArchivePath(path) {
			return nil, NotFound(path)
		}
		return []string{path}, nil
	}
	names, err := InDir(path)
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%s: no archive in this directory", path)
	}
	return names, nil
}

// OpenAll opens the archives of paths (see Find), in the order given; the
// archives of a directory in name order.
func OpenAll(paths []string) ([]*Archive, error) {
	var out []*Archive
	for _, p := range paths {
		names, err := Find(p)
		if err == nil {
			for _, n := range names {
				var a *Archive
				if a, err = Open(n); err != nil {
					break
				}
				out = append(out, a)
			}
		}
		if err != nil {
			for _, a := range out {
				a.Close()
			}
			return nil, err
		}
	}
	return out, nil
}

// HostDirs returns the directories of archives under path: path itself
// when it holds an archive, else its subdirectories that do (a pmlogger
// farm: /var/log/pcp/pmlogger/HOST), in name order; nil when there are
// none (or path is no directory).
func HostDirs(path string) []string {
	if names, err := InDir(path); err != nil || len(names) > 0 {
		if err != nil {
			return nil
		}
		return []string{path}
	}
	ents, _ := os.ReadDir(path)
	var dirs []string
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		d := filepath.Join(path, e.Name())
		if names, _ := InDir(d); len(names) > 0 {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// latestFolio is PCP's name for the folio pmlogger_check keeps in a
// pmlogger directory, naming the archive being written.
const latestFolio = "Latest"

// HasLatest reports whether dir has pmlogger_check's Latest folio (a
// directory kept by pmlogger_check and pmlogger_daily).
func HasLatest(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, latestFolio))
	return err == nil
}

// Newest returns the archive of dir that pmlogger writes: the one the
// Latest folio names when it exists, else the one whose label starts last
// among those with a plain (uncompressed) .meta file; starts caches the
// label starts read, by base name (nil: no cache).
func Newest(dir string, starts map[string]time.Time) (string, error) {
	if b := fromFolio(filepath.Join(dir, latestFolio)); b != "" {
		if _, err := findFile(b + ".meta"); err == nil {
			return b, nil
		}
	}
	names, err := InDir(dir)
	if err != nil {
		return "", err
	}
	var best string
	var bestStart time.Time
	for _, n := range names {
		if _, err := os.Stat(n + ".meta"); err != nil {
			continue // compressed: finished
		}
		s, ok := starts[n]
		if !ok {
			l, err := ReadLabel(n + ".meta")
			if err != nil {
				continue // being created, or not an archive
			}
			s = l.Start
			if starts != nil {
				starts[n] = s
			}
		}
		if best == "" || s.After(bestStart) {
			best, bestStart = n, s
		}
	}
	if best == "" {
		return "", fmt.Errorf("%s: no archive in this directory: %w", dir, fs.ErrNotExist)
	}
	return best, nil
}

// fromFolio returns the archive a PCP folio's first "Archive:" line names
// (relative to the folio's directory), "" when there is none.
func fromFolio(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 0; sc.Scan() && n < 100; n++ {
		// Archive:	HOST	BASENAME
		fs := strings.Fields(sc.Text())
		if len(fs) == 3 && fs[0] == "Archive:" {
			if filepath.IsAbs(fs[2]) {
				return fs[2]
			}
			return filepath.Join(filepath.Dir(path), fs[2])
		}
	}
	return ""
}

// ReadLabel reads the label of a plain archive file.
func ReadLabel(path string) (Label, error) {
	f, err := os.Open(path)
	if err != nil {
		return Label{}, err
	}
	defer f.Close()
	b := make([]byte, LabelLenV3)
	n, err := io.ReadFull(f, b)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return Label{}, fmt.Errorf("%s: %w", path, err)
	}
	return ParseLabel(path, b[:n])
}
