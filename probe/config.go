package probe

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/pcp-exporter/pcp-exporter/mapping"
	"github.com/pcp-exporter/pcp-exporter/source/pmcd"
)

// Config is the file of named auths, modules and the /probe limits
// (--pmcd.config), in the style of snmp_exporter's auths and modules:
//
//	auths:
//	  prod:
//	    tls: {ca_file: /etc/pcp-exporter/ca.pem, server_name: "", cert_file: "", key_file: ""}
//	    sasl: {mechanism: scram-sha-256, username: pcpmon, password_file: /etc/pcp-exporter/pw}
//	modules:
//	  default: {metrics: [kernel, mem, disk, network, pmcd]}
//	  node: {naming: node}
//	probe:
//	  allow: [10.0.0.0/8, db1.example.com, "unix:/run/pcp/pmcd.socket"]
//	  max_targets: 2000
//	  max_concurrent: 64
//	  idle_timeout: 5m
//
// Secrets come from files or the environment (password_file,
// password_env), never from the file itself, a URL or a flag.
type Config struct {
	Auths   map[string]Auth   `yaml:"auths"`
	Modules map[string]Module `yaml:"modules"`
	Probe   Limits            `yaml:"probe"`

	file string
	// secs are the auths' Security, built once per load.
	secs map[string]*pmcd.Security
}

// Auth is how to protect and authenticate a connection to pmcd.
type Auth struct {
	TLS  *TLS  `yaml:"tls"`
	SASL *SASL `yaml:"sasl"`
}

// TLS configures the in-band TLS upgrade. pmcd's certificate and name are
// verified (against ca_file, or the system's CAs) unless
// insecure_skip_verify is true.
type TLS struct {
	CAFile             string `yaml:"ca_file"`
	CertFile           string `yaml:"cert_file"`
	KeyFile            string `yaml:"key_file"`
	ServerName         string `yaml:"server_name"`
	InsecureSkipVerify bool   `yaml:"insecure_skip_verify"`
}

// SASL are the credentials of pmcd's SASL authentication.
type SASL struct {
	Mechanism    string `yaml:"mechanism"`
	Username     string `yaml:"username"`
	PasswordFile string `yaml:"password_file"`
	PasswordEnv  string `yaml:"password_env"`
}

// Module selects the metrics of a probe and how they are named.
type Module struct {
	// Metrics are --pmcd.metrics patterns (default: all).
	Metrics []string `yaml:"metrics"`
	// Naming is the module's naming profile, as serve's --naming: default,
	// pmproxy, node or hostmetrics (default: serve's).
	Naming string `yaml:"naming"`
	// Timeout bounds a probe (default 10 s; the scrape timeout Prometheus
	// sends is used when shorter).
	Timeout time.Duration `yaml:"timeout"`
}

// Limits bound what /probe may do.
type Limits struct {
	// Allow lists the targets that may be probed: networks (CIDR), IP
	// addresses, host names (matched exactly, not resolved) and
	// unix:PATH. Empty: nothing may be probed.
	Allow []string `yaml:"allow"`
	// MaxTargets bounds the pool of connections (default 1000): the
	// least recently probed idle target is closed to make room.
	MaxTargets int `yaml:"max_targets"`
	// MaxConcurrent bounds the probes under way (default 64).
	MaxConcurrent int `yaml:"max_concurrent"`
	// MaxMetadataReads bounds the targets whose metadata is read at once
	// (default 16): a target's first probe reads it (the rest of its
	// probes only fetch values), and a fleet's first probes would
	// otherwise read all of them together, at the cost of each one's
	// replies held in memory and of the CPU shared with other probes.
	MaxMetadataReads int `yaml:"max_metadata_reads"`
	// IdleTimeout closes a target not probed for this long (default 5m).
	IdleTimeout time.Duration `yaml:"idle_timeout"`
}

// Load reads and checks a configuration file; every error names the file
// (and the line for YAML errors).
func Load(file string) (*Config, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var c Config
	d := yaml.NewDecoder(bytes.NewReader(b))
	d.KnownFields(true)
	if err := d.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: %s", file, strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	c.file = file
	if c.Probe.MaxTargets <= 0 {
		c.Probe.MaxTargets = 1000
	}
	if c.Probe.MaxConcurrent <= 0 {
		c.Probe.MaxConcurrent = 64
	}
	if c.Probe.MaxMetadataReads <= 0 {
		c.Probe.MaxMetadataReads = 16
	}
	if c.Probe.IdleTimeout <= 0 {
		c.Probe.IdleTimeout = 5 * time.Minute
	}
	for _, a := range c.Probe.Allow {
		if _, err := parseAllow(a); err != nil {
			return nil, fmt.Errorf("%s: probe.allow %q: %v", file, a, err)
		}
	}
	for name, m := range c.Modules {
		if _, err := pmcd.ParseSelection(m.Metrics); err != nil {
			return nil, fmt.Errorf("%s: module %q: %v", file, name, err)
		}
		if m.Naming != "" {
			if _, err := mapping.ParseNaming(m.Naming); err != nil {
				return nil, fmt.Errorf("%s: module %q: %v", file, name, err)
			}
		}
	}
	c.secs = map[string]*pmcd.Security{}
	for _, name := range sortedKeys(c.Auths) {
		sec, err := c.Auths[name].security()
		if err != nil {
			return nil, fmt.Errorf("%s: auth %q: %v", file, name, err)
		}
		c.secs[name] = sec
	}
	return &c, nil
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// Security is the named auth's pmcd.Security ("" is none).
func (c *Config) Security(auth string) (*pmcd.Security, error) {
	if auth == "" {
		return nil, nil
	}
	if s, ok := c.secs[auth]; ok {
		return s, nil
	}
	return nil, fmt.Errorf("auth %q is not in %s (has: %s)", auth, c.file, strings.Join(sortedKeys(c.Auths), ", "))
}

// Module is the named module ("" is "default" when defined, else all
// metrics).
func (c *Config) Module(name string) (Module, error) {
	if name == "" {
		name = "default"
	}
	if m, ok := c.Modules[name]; ok {
		return m, nil
	}
	if name == "default" {
		return Module{}, nil
	}
	return Module{}, fmt.Errorf("module %q is not in %s (has: %s)", name, c.file, strings.Join(sortedKeys(c.Modules), ", "))
}

func (a Auth) security() (*pmcd.Security, error) {
	if a.TLS == nil && a.SASL == nil {
		return nil, errors.New("neither tls nor sasl")
	}
	sec := &pmcd.Security{}
	if t := a.TLS; t != nil {
		cfg := &tls.Config{ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify, MinVersion: tls.VersionTLS12}
		if t.CAFile != "" {
			b, err := os.ReadFile(t.CAFile)
			if err != nil {
				return nil, fmt.Errorf("tls ca_file: %v", err)
			}
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(b) {
				return nil, fmt.Errorf("tls ca_file %s: no PEM certificate", t.CAFile)
			}
		}
		if (t.CertFile == "") != (t.KeyFile == "") {
			return nil, errors.New("tls cert_file and key_file go together")
		}
		if t.CertFile != "" {
			pair, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
			if err != nil {
				return nil, fmt.Errorf("tls cert_file/key_file: %v", err)
			}
			cfg.Certificates = []tls.Certificate{pair}
		}
		sec.TLS = cfg
	}
	if s := a.SASL; s != nil {
		if s.Username == "" {
			return nil, errors.New("sasl username is empty")
		}
		if (s.PasswordFile == "") == (s.PasswordEnv == "") {
			return nil, errors.New("sasl needs one of password_file and password_env")
		}
		file, env := s.PasswordFile, s.PasswordEnv
		pw := func() (string, error) {
			if env != "" {
				v, ok := os.LookupEnv(env)
				if !ok {
					return "", fmt.Errorf("environment variable %s is not set", env)
				}
				return v, nil
			}
			b, err := os.ReadFile(file)
			if err != nil {
				return "", err
			}
			return strings.TrimRight(string(b), "\r\n"), nil
		}
		if _, err := pw(); err != nil {
			return nil, fmt.Errorf("sasl password: %v", err)
		}
		sec.SASL = &pmcd.SASL{Mechanism: s.Mechanism, User: s.Username, Password: pw}
	}
	return sec, nil
}

// allowRule is one entry of probe.allow.
type allowRule struct {
	net  *net.IPNet
	name string // a host name or unix:PATH, matched exactly
}

func parseAllow(s string) (allowRule, error) {
	if strings.HasPrefix(s, "unix:") {
		return allowRule{name: s}, nil
	}
	if _, n, err := net.ParseCIDR(s); err == nil {
		return allowRule{net: n}, nil
	}
	if ip := net.ParseIP(s); ip != nil {
		bits := 32
		if ip.To4() == nil {
			bits = 128
		}
		return allowRule{net: &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)}}, nil
	}
	if s == "" || strings.ContainsAny(s, "/: ") {
		return allowRule{}, errors.New("not a network, an address, a host name or unix:PATH")
	}
	return allowRule{name: strings.ToLower(s)}, nil
}

// Allowed says whether target (HOST[:PORT], [V6]:PORT or unix:PATH) may
// be probed.
func (c *Config) Allowed(target string) bool {
	host := target
	if !strings.HasPrefix(target, "unix:") {
		if h, _, err := net.SplitHostPort(target); err == nil {
			host = h
		}
		host = strings.ToLower(strings.Trim(host, "[]"))
	}
	ip := net.ParseIP(host)
	for _, a := range c.Probe.Allow {
		r, _ := parseAllow(a)
		switch {
		case r.net != nil && ip != nil && r.net.Contains(ip):
			return true
		case r.name != "" && r.name == host:
			return true
		}
	}
	return false
}
