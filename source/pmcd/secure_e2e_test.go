package pmcd

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pcp-exporter/pcp-exporter/internal/e2e"
	"github.com/pcp-exporter/pcp-exporter/semantics"
	"github.com/pcp-exporter/pcp-exporter/source"
)

const testPassword = "Pw-of-the-test-7c1e"

// securePMCDs are private pmcds (PCP 6.0.3's, OpenSSL and Cyrus SASL) with
// certificates made by the test: a, TLS with the SASL user "nobody"; b,
// TLS demanding a client certificate; c, TLS with an expired certificate.
type securePMCDs struct {
	pminfo          string
	a, b, c         *e2e.PMCD
	ca, other       *e2e.CA
	client          e2e.TLSFiles
	roots, badRoots *x509.CertPool
}

func startSecurePMCDs(t *testing.T) *securePMCDs {
	p := &securePMCDs{pminfo: e2e.Require(t, "pminfo", "saslpasswd2")[0]}
	p.ca, p.other = e2e.NewCA(t, "pcpx-test"), e2e.NewCA(t, "pcpx-other")
	now := time.Now()
	srv := p.ca.Issue(t, "server", []string{"pmcd.test", "127.0.0.1"}, now.Add(-time.Hour), now.Add(time.Hour), false)
	expired := p.ca.Issue(t, "expired", []string{"pmcd.test", "127.0.0.1"}, now.Add(-48*time.Hour), now.Add(-24*time.Hour), false)
	p.client = p.ca.Issue(t, "client", []string{"collector.test"}, now.Add(-time.Hour), now.Add(time.Hour), true)
	p.a = e2e.StartPMCD(t, e2e.PMCDConfig{TLS: &srv, Users: map[string]string{"nobody": testPassword}})
	p.b = e2e.StartPMCD(t, e2e.PMCDConfig{TLS: &srv, Args: []string{"-Q"}})
	p.c = e2e.StartPMCD(t, e2e.PMCDConfig{TLS: &expired})
	p.roots, p.badRoots = pool(t, p.ca.File), pool(t, p.other.File)
	return p
}

func pool(t *testing.T, file string) *x509.CertPool {
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	cp := x509.NewCertPool()
	cp.AppendCertsFromPEM(b)
	return cp
}

// pminfoSecure runs pminfo -f on spec with a client tls.conf of its own
// (verifying pmcd's certificate, as libpcp does only when asked).
func (p *securePMCDs) pminfoSecure(t *testing.T, spec string, clientCert bool, ca string, metrics ...string) (string, error) {
	conf := "tls-ca-cert-file = " + ca + "\ntls-verify-clients = true\n"
	if clientCert {
		conf += "tls-client-cert-file = " + p.client.Cert + "\ntls-client-key-file = " + p.client.Key + "\n"
	}
	f := filepath.Join(t.TempDir(), "tls.conf")
	os.WriteFile(f, []byte(conf), 0o644)
	cmd := exec.Command(p.pminfo, append([]string{"-h", spec, "-f"}, metrics...)...)
	cmd.Env = append(os.Environ(), "PCP_TLSCONF_PATH="+f)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// fetchNamed opens spec with sec and fetches the named metrics: each one's
// values by instance, or its error.
func fetchNamed(t *testing.T, spec string, sec *Security, log *slog.Logger, names ...string) (map[string]map[int32]string, map[string]error, error) {
	s, err := Open(spec, Options{Selection: Selection{Include: names}, Timeout: 5 * time.Second, Security: sec, Logger: log})
	if err != nil {
		return nil, nil, err
	}
	defer s.Close()
	var pmids []semantics.PMID
	byID := map[semantics.PMID]string{}
	for _, m := range s.Metrics() {
		pmids = append(pmids, m.Desc.PMID)
		byID[m.Desc.PMID] = m.Name
	}
	var res source.Result
	if err := s.Fetch(time.Now(), pmids, &res); err != nil {
		return nil, nil, err
	}
	vals, errs := map[string]map[int32]string{}, map[string]error{}
	for _, set := range res.Sets {
		n := byID[set.PMID]
		if set.Err != nil {
			errs[n] = set.Err
			continue
		}
		vals[n] = map[int32]string{}
		for _, v := range set.Values {
			vals[n][v.Inst] = strconv.FormatUint(v.Value.Uint64(), 10)
		}
	}
	return vals, errs, nil
}

func scramAuth(user, pw, mech string) *SASL {
	return &SASL{Mechanism: mech, User: user, Password: func() (string, error) { return pw, nil }}
}

// TestSecurePMCD: against pmcds of PCP 6.0.3 configured by the test, TLS
// (verified), TLS with SCRAM-SHA-256, PLAIN over the unix socket and a
// client certificate each give what pminfo gives with the same
// credentials; authenticated, the proc agent answers (unauthenticated
// over TCP it refuses, for pminfo as for us).
func TestSecurePMCD(t *testing.T) {
	t.Parallel()
	p := startSecurePMCDs(t)
	pid := strconv.Itoa(p.a.PID())
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	q := url.Values{"username": {"nobody"}, "password": {testPassword}}
	cases := []struct {
		name, spec, pminfoSpec string
		sec                    *Security
		clientCert, authed     bool
	}{
		{"tls", p.a.Addr, "pcps://" + p.a.Addr, &Security{TLS: &tls.Config{RootCAs: p.roots}}, false, false},
		{"tls+scram", p.a.Addr, "pcps://" + p.a.Addr + "?method=scram-sha-256&" + q.Encode(),
			&Security{TLS: &tls.Config{RootCAs: p.roots}, SASL: scramAuth("nobody", testPassword, "scram-sha-256")}, false, true},
		{"tls+login", p.a.Addr, "pcps://" + p.a.Addr + "?method=login&" + q.Encode(),
			&Security{TLS: &tls.Config{RootCAs: p.roots}, SASL: scramAuth("nobody", testPassword, "login")}, false, true},
		{"unix+plain", "unix:" + p.a.Socket, "unix:" + p.a.Socket + "?method=plain&" + q.Encode(),
			&Security{SASL: scramAuth("nobody", testPassword, "plain")}, false, true},
		{"tcp+scram", p.a.Addr, "pcp://" + p.a.Addr + "?method=scram-sha-256&" + q.Encode(),
			&Security{SASL: scramAuth("nobody", testPassword, "")}, false, true},
		{"client cert", p.b.Addr, "pcps://" + p.b.Addr, &Security{TLS: &tls.Config{RootCAs: p.roots, Certificates: []tls.Certificate{loadPair(t, p.client)}}}, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, perr := p.pminfoSecure(t, tc.pminfoSpec, tc.clientCert, p.ca.File, "pmcd.numagents", "proc.psinfo.pid")
			vals, errs, err := fetchNamed(t, tc.spec, tc.sec, log, "pmcd.numagents", "proc.psinfo.pid")
			if err != nil {
				t.Fatalf("%v (pminfo: %v: %s)", err, perr, out)
			}
			if perr != nil && !strings.Contains(out, "proc.psinfo.pid") {
				t.Fatalf("pminfo: %v: %s", perr, out)
			}
			want := regexp.MustCompile(`pmcd.numagents\s+value (\d+)`).FindStringSubmatch(out)
			if want == nil || vals["pmcd.numagents"][-1] != want[1] {
				t.Errorf("pmcd.numagents %v, pminfo %q", vals["pmcd.numagents"], out)
			}
			// proc.psinfo.pid of the pmcd's own process
			pminfoHas := regexp.MustCompile(`inst \[` + pid + ` or "0*` + pid + ` [^"]*"\] value ` + pid + `\b`).MatchString(out)
			if pminfoHas != tc.authed {
				t.Fatalf("pminfo shows pmcd's own process: %v, want %v: %s", pminfoHas, tc.authed, out)
			}
			n, _ := strconv.Atoi(pid)
			if got := vals["proc.psinfo.pid"][int32(n)]; (got == pid) != tc.authed {
				t.Errorf("proc.psinfo.pid[%s] = %q (error %v), pminfo: %s", pid, got, errs["proc.psinfo.pid"], out)
			}
			if !tc.authed {
				if e := errs["proc.psinfo.pid"]; e == nil || !strings.Contains(out, e.Error()) {
					t.Errorf("proc.psinfo.pid error %v, pminfo %q", e, out)
				}
			}
		})
	}
	t.Run("all metrics", func(t *testing.T) {
		out, err := p.pminfoSecure(t, "pcps://"+p.a.Addr+"?method=scram-sha-256&"+q.Encode(), false, p.ca.File)
		if err != nil {
			t.Fatalf("pminfo: %v: %s", err, out)
		}
		want := strings.Fields(out)
		s, err := Open(p.a.Addr, Options{Timeout: 5 * time.Second, Logger: log, Security: &Security{TLS: &tls.Config{RootCAs: p.roots}, SASL: scramAuth("nobody", testPassword, "")}})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		var got []string
		for _, m := range s.Metrics() {
			got = append(got, m.Name)
		}
		// names whose agent this pmcd does not run have no descriptor
		if len(got) < 100 || len(got) > len(want) {
			t.Fatalf("%d metrics over TLS+SCRAM, pminfo lists %d names", len(got), len(want))
		}
		for _, n := range got {
			if !slices.Contains(want, n) {
				t.Errorf("%s not listed by pminfo", n)
			}
		}
	})
	if strings.Contains(logs.String(), testPassword) {
		t.Errorf("the password is in the log: %s", logs.String())
	}
	if b, _ := os.ReadFile(p.a.Log); strings.Count(string(b), `Successful authentication for user "nobody"`) < 8 {
		t.Errorf("pmcd logged fewer than 8 authentications (4 by pminfo, 4 by us): %s", b)
	}
}

func loadPair(t *testing.T, f e2e.TLSFiles) tls.Certificate {
	c, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestSecurePMCDFailures: a wrong password, an unknown CA, a wrong server
// name, an expired certificate, a missing client certificate each give one
// line naming the pmcd, in time, without the password; pminfo (verifying
// the certificate) fails as well, except on the name, which libpcp does
// not check.
func TestSecurePMCDFailures(t *testing.T) {
	p := startSecurePMCDs(t)
	q := url.Values{"username": {"nobody"}, "password": {"wrong-" + testPassword}}
	cases := []struct {
		name, spec, pminfoSpec, pminfoCA string
		sec                              *Security
		want                             string
	}{
		{"wrong password", p.a.Addr, "pcps://" + p.a.Addr + "?method=scram-sha-256&" + q.Encode(), p.ca.File,
			&Security{TLS: &tls.Config{RootCAs: p.roots}, SASL: scramAuth("nobody", "wrong-"+testPassword, "SCRAM-SHA-256")},
			`authentication as "nobody" with SCRAM-SHA-256 failed: Authentication - authentication failure`},
		{"wrong password plain", "unix:" + p.a.Socket, "unix:" + p.a.Socket + "?method=plain&" + q.Encode(), p.ca.File,
			&Security{SASL: scramAuth("nobody", "wrong-"+testPassword, "PLAIN")},
			`authentication as "nobody" with PLAIN failed: Authentication - authentication failure`},
		{"unknown CA", p.a.Addr, "pcps://" + p.a.Addr, p.other.File,
			&Security{TLS: &tls.Config{RootCAs: p.badRoots}}, "not signed by a trusted CA"},
		{"wrong name", p.a.Addr, "", "",
			&Security{TLS: &tls.Config{RootCAs: p.roots, ServerName: "other.test"}}, `not valid for the name "other.test"`},
		{"expired", p.c.Addr, "pcps://" + p.c.Addr, p.ca.File,
			&Security{TLS: &tls.Config{RootCAs: p.roots}}, "has expired"},
		{"no client cert", p.b.Addr, "pcps://" + p.b.Addr, p.ca.File,
			&Security{TLS: &tls.Config{RootCAs: p.roots}}, "certificate required"},
		{"plain over tcp", p.a.Addr, "", "",
			&Security{SASL: scramAuth("nobody", testPassword, "PLAIN")}, "sends the password in clear"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.pminfoSpec != "" {
				if out, err := p.pminfoSecure(t, tc.pminfoSpec, false, tc.pminfoCA, "pmcd.numagents"); err == nil && !strings.Contains(out, "Error") {
					t.Errorf("pminfo succeeded: %s", out)
				}
			}
			start := time.Now()
			_, _, err := fetchNamed(t, tc.spec, tc.sec, nil, "pmcd.numagents")
			if err == nil {
				t.Fatal("connected")
			}
			msg := err.Error()
			t.Log(msg)
			if !strings.Contains(msg, tc.want) || !strings.Contains(msg, strings.TrimPrefix(tc.spec, "unix:")) || strings.Contains(msg, "\n") || strings.Contains(msg, testPassword) {
				t.Errorf("error %q: want one line naming %s and saying %q, without the password", msg, tc.spec, tc.want)
			}
			if d := time.Since(start); d > 4*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
}
