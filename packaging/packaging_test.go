package packaging

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/examples/mmvapp/shop"
	"github.com/pcp-exporter/pcp-exporter/internal/e2e"
	"github.com/pcp-exporter/pcp-exporter/internal/longtest"
	"github.com/pcp-exporter/pcp-exporter/source/mmv"
)

// maxExposure is the goal for systemd-analyze security's exposure
// level of pcp-exporter.service (Debian's prometheus.service: 4.0).
const maxExposure = 2.0

// listenAddr is where the test runs the packaged command line (this
// package's port, in the range given to packaging tests).
const listenAddr = "127.0.0.1:19291"

// exposure runs systemd-analyze security --offline=true on a unit file and
// returns the overall exposure level it prints.
func exposure(t *testing.T, unit string) float64 {
	t.Helper()
	sa := e2e.Require(t, "systemd-analyze")[0]
	out, err := exec.Command(sa, "security", "--offline=true", unit).CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze security --offline=true %s: %v\n%s", unit, err, out)
	}
	m := regexp.MustCompile(`Overall exposure level for \S+: ([0-9.]+) `).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no exposure level in:\n%s", out)
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestUnitExposure: the unit's sandbox scores at most maxExposure.
func TestUnitExposure(t *testing.T) {
	v := exposure(t, "pcp-exporter.service")
	t.Logf("systemd-analyze security --offline=true pcp-exporter.service: exposure %.1f (goal <= %.1f)", v, maxExposure)
	if v > maxExposure {
		t.Errorf("exposure %.1f > %.1f", v, maxExposure)
	}
}

var (
	pkgOnce        sync.Once
	pkgDeb, pkgRPM string
	pkgErr         error
)

// packages returns the .deb and .rpm: those in $PCP_EXPORTER_PACKAGE_DIR
// (.ci/run builds them with make package), else built once by
// scripts/build-packages.sh (a long test: a minute).
func packages(t *testing.T) (deb, rpm string) {
	t.Helper()
	dir := os.Getenv("PCP_EXPORTER_PACKAGE_DIR")
	if dir == "" {
		longtest.Skip(t, "builds the packages; set PCP_EXPORTER_PACKAGE_DIR to packages built by make package")
	}
	pkgOnce.Do(func() {
		if dir == "" {
			dir = filepath.Join(os.TempDir(), fmt.Sprintf("pcp-exporter-packages-%d", os.Getpid()))
			out, err := exec.Command("bash", "../scripts/build-packages.sh", dir).CombinedOutput()
			if err != nil {
				pkgErr = fmt.Errorf("scripts/build-packages.sh: %v\n%s", err, out)
				return
			}
		}
		debs, _ := filepath.Glob(filepath.Join(dir, "pcp-exporter_*.deb"))
		rpms, _ := filepath.Glob(filepath.Join(dir, "pcp-exporter-*.rpm"))
		if len(debs) != 1 || len(rpms) != 1 {
			pkgErr = fmt.Errorf("%s: want one .deb and one .rpm, have %q and %q", dir, debs, rpms)
			return
		}
		pkgDeb, pkgRPM = debs[0], rpms[0]
	})
	if pkgErr != nil {
		t.Fatal(pkgErr)
	}
	return pkgDeb, pkgRPM
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// dpkg runs dpkg, waiting while another dpkg or apt holds its lock.
func dpkg(t *testing.T, args ...string) string {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		out, err := exec.Command("dpkg", args...).CombinedOutput()
		if err == nil {
			return string(out)
		}
		if !bytes.Contains(out, []byte("lock")) || time.Now().After(deadline) {
			t.Fatalf("dpkg %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		time.Sleep(2 * time.Second)
	}
}

// debFiles lists the regular files and symlinks of a .deb (dpkg-deb -c).
func debFiles(t *testing.T, deb string) []string {
	var files []string
	for _, l := range strings.Split(run(t, "dpkg-deb", "-c", deb), "\n") {
		f := strings.Fields(l)
		if len(f) < 6 || strings.HasPrefix(f[0], "d") {
			continue
		}
		files = append(files, strings.TrimPrefix(f[5], "."))
	}
	slices.Sort(files)
	return files
}

// TestRPMMatchesDeb: the .rpm installs the .deb's files (but Debian's own:
// changelog.Debian.gz, the lintian override) and runs the same scripts.
func TestRPMMatchesDeb(t *testing.T) {
	tools := e2e.Require(t, "rpm", "dpkg-deb")
	deb, rpm := packages(t)
	out := run(t, tools[0], "-qlp", "--scripts", rpm)
	// rpm prints the scriptlets, then the file list
	scripts := map[string]string{}
	var files []string
	var cur string
	for _, l := range strings.SplitAfter(out, "\n") {
		if m := regexp.MustCompile(`^(\w+) scriptlet \(using /bin/sh\):\n$`).FindStringSubmatch(l); m != nil {
			cur = m[1]
			continue
		}
		if cur != "" && !strings.HasPrefix(l, "/") {
			scripts[cur] += l
			continue
		}
		cur = ""
		if s := strings.TrimSpace(l); s != "" {
			files = append(files, s)
		}
	}
	var want []string
	for _, f := range debFiles(t, deb) {
		if f == "/usr/share/doc/pcp-exporter/changelog.Debian.gz" || strings.HasPrefix(f, "/usr/share/lintian/") {
			continue
		}
		want = append(want, f)
	}
	var got []string
	for _, f := range files {
		if f != "/etc/pcp-exporter" { // the .deb lists directories apart
			got = append(got, f)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("rpm -qlp files:\n%s\nwant the .deb's:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !slices.Contains(files, "/etc/pcp-exporter") {
		t.Errorf("the .rpm does not own /etc/pcp-exporter")
	}
	ctl := t.TempDir()
	run(t, tools[1], "-e", deb, ctl)
	for rpmName, debName := range map[string]string{"postinstall": "postinst", "preuninstall": "prerm", "postuninstall": "postrm"} {
		b, err := os.ReadFile(filepath.Join(ctl, debName))
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(scripts[rpmName]) != strings.TrimSpace(string(b)) {
			t.Errorf("rpm %s scriptlet differs from the .deb's %s:\n%s\nvs\n%s", rpmName, debName, scripts[rpmName], b)
		}
	}
	if c, err := os.ReadFile(filepath.Join(ctl, "conffiles")); err != nil || strings.TrimSpace(string(c)) != "/etc/default/pcp-exporter" {
		t.Errorf("the .deb's conffiles: %q (%v), want /etc/default/pcp-exporter", c, err)
	}
	cfg := run(t, tools[0], "-qcp", rpm)
	if strings.TrimSpace(cfg) != "/etc/default/pcp-exporter" {
		t.Errorf("the .rpm's config files: %q, want /etc/default/pcp-exporter", cfg)
	}
}

// unitExec returns the ExecStart command line of a unit file with the
// variables of its EnvironmentFile expanded as systemd expands an unquoted
// $VAR: split into words at white space.
func unitExec(t *testing.T, unit string) []string {
	t.Helper()
	b, err := os.ReadFile(unit)
	if err != nil {
		t.Fatal(err)
	}
	var execStart, envFile string
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "ExecStart="); ok {
			execStart = v
		}
		if v, ok := strings.CutPrefix(l, "EnvironmentFile="); ok {
			envFile = strings.TrimPrefix(v, "-")
		}
	}
	env := map[string]string{}
	if envFile != "" {
		f, err := os.ReadFile(envFile)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(f), "\n") {
			k, v, ok := strings.Cut(strings.TrimSpace(l), "=")
			if !ok || strings.HasPrefix(k, "#") {
				continue
			}
			if uq, err := strconv.Unquote(v); err == nil {
				v = uq
			}
			env[k] = v
		}
	}
	var argv []string
	for _, w := range strings.Fields(execStart) {
		if name, ok := strings.CutPrefix(w, "$"); ok {
			argv = append(argv, strings.Fields(env[name])...)
			continue
		}
		argv = append(argv, w)
	}
	return argv
}

// scrape returns the exposition at listenAddr ("" when it does not answer).
func scrape() string {
	resp, err := http.Get("http://" + listenAddr + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// waitScrape scrapes until ok accepts the exposition (60 s at most: pmcd's
// metadata is read once at the start, several seconds on a busy host).
func waitScrape(t *testing.T, what string, ok func(string) bool, logPath string) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		if last = scrape(); ok(last) {
			return last
		}
		time.Sleep(500 * time.Millisecond)
	}
	logs, _ := os.ReadFile(logPath)
	t.Fatalf("no scrape with %s within 60 s; last scrape:\n%.3000s\nexporter log:\n%s", what, last, logs)
	return ""
}

func hasSeries(expo, prefix string) bool {
	for _, l := range strings.Split(expo, "\n") {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}

// TestDeb installs the .deb (dpkg -i), checks it with lintian and
// systemd-analyze, runs the unit's command line as the packaged user against
// the local pmcd and the MMV directory, reloads it with SIGHUP, reinstalls it
// over a changed /etc/default/pcp-exporter (kept), and removes and purges it.
func TestDeb(t *testing.T) {
	if raceEnabled {
		t.Skip("installs system-wide: runs once per CI run, without the race detector")
	}
	tools := e2e.Require(t, "dpkg", "lintian", "systemd-analyze", "pminfo")
	if os.Geteuid() != 0 {
		if e2e.Mandatory() {
			t.Fatal("dpkg -i needs root")
		}
		t.Skip("dpkg -i needs root (set CI=true to make this a failure)")
	}
	deb, _ := packages(t)

	out, err := exec.Command(tools[1], "--fail-on", "error", deb).CombinedOutput()
	t.Logf("lintian:\n%s", out)
	if err != nil || regexp.MustCompile(`(?m)^E: `).Match(out) {
		t.Errorf("lintian reports errors (%v)", err)
	}

	t.Cleanup(func() { exec.Command("dpkg", "--purge", "pcp-exporter").Run() })
	dpkg(t, "-i", deb)

	// the user, its group and its membership of pcp
	u, err := user.Lookup("pcp-exporter")
	if err != nil {
		t.Fatal(err)
	}
	gids, err := u.GroupIds()
	if err != nil {
		t.Fatal(err)
	}
	if pcp, err := user.LookupGroup("pcp"); err != nil || !slices.Contains(gids, pcp.Gid) {
		t.Errorf("pcp-exporter's groups %v lack pcp (%v)", gids, err)
	}

	unit := "/lib/systemd/system/pcp-exporter.service"
	if out, err := exec.Command(tools[2], "verify", unit, "/lib/systemd/system/pcp-exporter.socket").CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	v := exposure(t, unit)
	t.Logf("systemd-analyze security --offline=true %s: exposure %.1f (goal <= %.1f)", unit, v, maxExposure)
	if v > maxExposure {
		t.Errorf("exposure %.1f > %.1f", v, maxExposure)
	}

	// the version stamped: the package's version and the revision built
	ver := run(t, "dpkg-query", "-W", "-f=${Version}", "pcp-exporter")
	vout := run(t, "/usr/bin/pcp-exporter", "--version")
	if upstream, _, _ := strings.Cut(ver, "-"); !strings.Contains(vout, "version "+upstream+" ") || !regexp.MustCompile(`revision: [0-9a-f]{40}\)`).MatchString(vout) {
		t.Errorf("--version %q does not say version %s and a revision", vout, ver)
	}
	// every flag the default file documents is one of serve's
	help := run(t, "/usr/bin/pcp-exporter", "serve", "--help")
	def, err := os.ReadFile("/etc/default/pcp-exporter")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`--([a-z][a-z.-]+)`).FindAllStringSubmatch(string(def), -1) {
		flag := strings.TrimPrefix(m[1], "no-")
		if !strings.Contains(help, "--"+flag) && !strings.Contains(help, "--[no-]"+flag) {
			t.Errorf("/etc/default/pcp-exporter names --%s, not a flag of serve", m[1])
		}
	}

	t.Run("ExecStart", func(t *testing.T) {
		e2e.LockPMCD(t, false) // reads the system pmcd
		runExecStart(t, unit, u)
	})

	t.Run("socket", func(t *testing.T) { runSocket(t, u) })

	// an upgrade (here a reinstall) keeps a changed conffile
	changed := append(def, []byte("# changed by the test\n")...)
	if err := os.WriteFile("/etc/default/pcp-exporter", changed, 0o644); err != nil {
		t.Fatal(err)
	}
	dpkg(t, "--force-confold", "-i", deb)
	if b, _ := os.ReadFile("/etc/default/pcp-exporter"); !bytes.Equal(b, changed) {
		t.Errorf("reinstalling replaced the changed /etc/default/pcp-exporter")
	}

	dpkg(t, "--remove", "pcp-exporter")
	if _, err := os.Stat("/usr/bin/pcp-exporter"); err == nil {
		t.Errorf("/usr/bin/pcp-exporter left after dpkg --remove")
	}
	if _, err := os.Stat("/etc/default/pcp-exporter"); err != nil {
		t.Errorf("the conffile went with dpkg --remove (it stays until purge): %v", err)
	}
	dpkg(t, "--purge", "pcp-exporter")
	for _, p := range []string{"/etc/default/pcp-exporter", "/etc/pcp-exporter", unit} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s left after dpkg --purge", p)
		}
	}
}

// runExecStart runs the unit's command line as user u (with its groups, as
// systemd's User= does) and checks that it serves pmcd's metrics and an MMV
// application's, and that SIGHUP reloads its mapping file.
func runExecStart(t *testing.T, unit string, u *user.User) {
	// the mapping file an operator would put in /etc/pcp-exporter, named in ARGS
	mapFile := "/etc/pcp-exporter/mapping.yaml"
	if err := os.WriteFile(mapFile, []byte("exclude: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(mapFile)
	argv := unitExec(t, unit)
	if slices.ContainsFunc(argv, func(a string) bool { return strings.HasPrefix(a, "--web.listen-address") }) {
		t.Fatalf("ARGS of the default file set --web.listen-address: the test cannot choose its port: %q", argv)
	}
	// the unit's command line as it is, but for the test's port and
	// mapping file: the lean default reads pmcd's metadata without proc's
	// (pmcd up 1.5 s after the start at load 3; this subtest, SIGHUP
	// included, 17 s at load 16)
	argv = append(argv, "--web.listen-address="+listenAddr, "--mapping.config="+mapFile)
	t.Logf("running as %s: %q", u.Username, argv)

	// an MMV application writing into the system MMV directory
	app, err := shop.New(filepath.Join(mmv.DefaultDir(), "pcpxpkgtest"))
	if err != nil {
		if e2e.Mandatory() {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	defer app.Close()
	app.Tick()

	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	gids, _ := u.GroupIds()
	var groups []uint32
	for _, g := range gids {
		n, _ := strconv.Atoi(g)
		groups = append(groups, uint32(n))
	}
	logPath := filepath.Join(t.TempDir(), "exporter.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: groups}}
	started := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()

	both := func(e string) bool {
		return hasSeries(e, "kernel_all_load{") && hasSeries(e, "mmv_pcpxpkgtest_requests_total{")
	}
	expo := waitScrape(t, "pmcd's kernel_all_load and the MMV application's mmv_pcpxpkgtest_requests_total", both, logPath)
	t.Logf("pmcd's and the MMV application's metrics served %.1f s after the start", time.Since(started).Seconds())
	for _, l := range strings.Split(expo, "\n") {
		if strings.HasPrefix(l, "pcp_exporter_source_up{") && !strings.HasSuffix(l, " 1") {
			t.Errorf("a source is not up: %s", l)
		}
	}

	// SIGHUP reloads the mapping file: kernel.all.load excluded
	if err := os.WriteFile(mapFile, []byte("exclude: [kernel.all.load]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitScrape(t, "kernel_all_load gone after SIGHUP", func(e string) bool {
		return !hasSeries(e, "kernel_all_load{") && hasSeries(e, "mmv_pcpxpkgtest_requests_total{") && hasSeries(e, "pcp_exporter_config_last_reload_successful 1")
	}, logPath)
	logs, _ := os.ReadFile(logPath)
	sc := bufio.NewScanner(bytes.NewReader(logs))
	for sc.Scan() {
		if strings.Contains(sc.Text(), "level=ERROR") {
			t.Errorf("exporter logged an error: %s", sc.Text())
		}
	}
}

// runSocket: with the socket unit's ListenStream handed over as systemd
// does (systemd-socket-activate: LISTEN_FDS), the packaged binary serves on
// it with --web.systemd-socket, as the socket's comment and the README say.
func runSocket(t *testing.T, u *user.User) {
	sa := e2e.Require(t, "systemd-socket-activate")[0]
	b, err := os.ReadFile("/lib/systemd/system/pcp-exporter.socket")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^ListenStream=9464$`).Match(b) || !regexp.MustCompile(`(?m)^Service=pcp-exporter.service$`).Match(b) {
		t.Fatalf("pcp-exporter.socket does not listen on 9464 for pcp-exporter.service:\n%s", b)
	}
	// an MMV directory the packaged user can read (t.TempDir's parent is root's alone)
	mmvDir, err := os.MkdirTemp("", "pcpxpkgsocket")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(mmvDir)
	if err := os.Chmod(mmvDir, 0o755); err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	// the test's port instead of 9464; the exporter runs as the packaged user
	cmd := exec.Command(sa, "-l", listenAddr, "--", "/usr/bin/pcp-exporter", "serve", "--web.systemd-socket", "--mmv.dir="+mmvDir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	logPath := filepath.Join(t.TempDir(), "exporter.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	waitScrape(t, "the MMV source's pcp_exporter_source_up on the handed-over socket", func(e string) bool {
		return hasSeries(e, `pcp_exporter_source_up{reason="",source="`+mmvDir+`"} 1`)
	}, logPath)
}
