package test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// TestPMCDConfig: pmcdConfig renders pmcd.yml into the ConfigMap with the
// auths' secrets as paths of Kubernetes Secrets mounted read-only, the
// flags --pmcd.config and --pmcd.auth, and no Secret of its own; the
// exporter runs with the rendered args and file (the Secrets' keys as
// files) and answers /probe with the file's auths and modules.
func TestPMCDConfig(t *testing.T) {
	m := renderValues(t, filepath.Join(chartDir, "ci", "daemonset-pmcd-auth-values.yaml"))
	if slices.Contains(m.kinds, "Secret") {
		t.Error("the chart rendered a Secret: secrets are the user's")
	}
	if len(m.configMaps) != 1 || len(m.daemonSets) != 1 {
		t.Fatalf("%d ConfigMaps, %d DaemonSets", len(m.configMaps), len(m.daemonSets))
	}
	file := m.configMaps[0].Data["pmcd.yml"]
	var conf struct {
		Auths map[string]map[string]map[string]any `json:"auths"`
	}
	if err := yaml.Unmarshal([]byte(file), &conf); err != nil {
		t.Fatalf("pmcd.yml: %v\n%s", err, file)
	}
	want := map[string]string{
		"fleet.tls.ca_file":     "/etc/pcp-exporter-secrets/pmcd-tls/ca.crt",
		"fleet.tls.cert_file":   "/etc/pcp-exporter-secrets/pmcd-client-cert/tls.crt",
		"fleet.tls.key_file":    "/etc/pcp-exporter-secrets/pmcd-client-cert/tls.key",
		"fleet.tls.server_name": "pmcd.example.com",
		"fleet.sasl.mechanism":  "scram-sha-256", "fleet.sasl.username": "pcpmon",
		"fleet.sasl.password_file": "/etc/pcp-exporter-secrets/pmcd-sasl/password",
		"local.sasl.mechanism":     "plain", "local.sasl.username": "pcpmon",
		"local.sasl.password_file": "/etc/pcp-exporter-secrets/pmcd-sasl/password",
	}
	got := map[string]string{}
	for a, blocks := range conf.Auths {
		for b, fields := range blocks {
			for k, v := range fields {
				got[a+"."+b+"."+k], _ = v.(string)
			}
		}
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("pmcd.yml %s = %q, want %q", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("pmcd.yml auths have %d fields, want %d: %v", len(got), len(want), got)
	}
	spec := m.daemonSets[0].Spec.Template.Spec
	c := exporter(t, "daemonset", spec)
	if v, _ := flagValue(c.Args, "pmcd.config"); v != "/etc/pcp-exporter/pmcd.yml" {
		t.Errorf("--pmcd.config=%q", v)
	}
	if v, _ := flagValue(c.Args, "pmcd.auth"); v != "local" {
		t.Errorf("--pmcd.auth=%q", v)
	}
	// each secret file is in a read-only mount of a Secret volume of that name
	secrets := map[string]string{} // mount path -> Secret
	for _, vm := range c.VolumeMounts {
		for _, v := range spec.Volumes {
			if v.Name == vm.Name && v.Secret != nil {
				if !vm.ReadOnly || v.Secret.DefaultMode == nil || *v.Secret.DefaultMode&0o027 != 0 {
					t.Errorf("Secret %s mounted writable or readable by others: %+v %+v", v.Secret.SecretName, vm, v.Secret)
				}
				secrets[vm.MountPath] = v.Secret.SecretName
			}
		}
	}
	for k, path := range got {
		if !strings.HasSuffix(k, "_file") {
			continue
		}
		dir, key := filepath.Split(path)
		if s := secrets[strings.TrimSuffix(dir, "/")]; s == "" || filepath.Base(dir) != s || key == "" {
			t.Errorf("%s: %s is in no mounted Secret (%v)", k, path, secrets)
		}
	}
	if len(secrets) != 3 {
		t.Errorf("%d Secrets mounted, want 3 (pmcd-tls, pmcd-client-cert, pmcd-sasl): %v", len(secrets), secrets)
	}

	// the exporter with the rendered file and args, the Secrets' keys as files
	bin := exporterBinary(t)
	dir := t.TempDir()
	secretDir := filepath.Join(dir, "secrets")
	const password = "pw-in-a-secret-3f9a"
	writeSecret := func(secret, key string, b []byte) {
		os.MkdirAll(filepath.Join(secretDir, secret), 0o755)
		if err := os.WriteFile(filepath.Join(secretDir, secret, key), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cert, key := selfSigned(t)
	writeSecret("pmcd-tls", "ca.crt", cert)
	writeSecret("pmcd-client-cert", "tls.crt", cert)
	writeSecret("pmcd-client-cert", "tls.key", key)
	writeSecret("pmcd-sasl", "password", []byte(password+"\n"))
	confFile := filepath.Join(dir, "pmcd.yml")
	os.WriteFile(confFile, []byte(strings.ReplaceAll(file, "/etc/pcp-exporter-secrets", secretDir)), 0o644)
	closed := freeAddr(t)
	run := c
	run.Args = slices.DeleteFunc(slices.Clone(c.Args), func(a string) bool {
		// no node pmcd with the auth's SASL user here
		return strings.HasPrefix(a, "--pmcd=") || strings.HasPrefix(a, "--pmcd.auth=")
	})
	body := serveRendered(t, bin, run, func(a string) string {
		switch {
		case strings.HasPrefix(a, "--pmcd.config="):
			return "--pmcd.config=" + confFile
		case strings.HasPrefix(a, "--mmv.dir="):
			return "--mmv.dir=" + dir
		}
		return a
	}, nil, "/metrics", "/probe?target="+closed+"&module=node&auth=fleet")
	if !strings.Contains(body, "pcp_probe_success 0") {
		t.Errorf("/probe of a closed port with the fleet auth: %s", body)
	}
	for _, s := range []string{password, string(key)} {
		if strings.Contains(file, s) || strings.Contains(strings.Join(c.Args, " "), s) {
			t.Error("a secret is in the ConfigMap or the args")
		}
	}
}

// TestPMCDConfigRejectsSecretValues: a password, key or certificate given
// as a value, or an auth --pmcd.auth names that does not exist, fails the
// rendering, naming the value.
func TestPMCDConfigRejectsSecretValues(t *testing.T) {
	values := filepath.Join(chartDir, "ci", "daemonset-pmcd-auth-values.yaml")
	for _, tc := range []struct{ set, want string }{
		{"pmcdConfig.auths.fleet.sasl.password=hunter2", "pmcdConfig.auths.fleet.sasl.password: secrets are not values"},
		{"pmcdConfig.auths.fleet.sasl.passwordFile=hunter2", "pmcdConfig.auths.fleet.sasl.passwordFile: secrets are not values"},
		{"pmcdConfig.auths.fleet.tls.keyFile=-----BEGIN PRIVATE KEY-----", "pmcdConfig.auths.fleet.tls.keyFile: secrets are not values"},
		{"pmcdConfig.auths.fleet.tls.caFile.path=/x", `unknown field "path"`},
		{"pmcdConfig.auths.fleet.sasl.passwordFile.key=null", "pmcdConfig.auths.fleet.sasl.passwordFile.key is required"},
		{"pmcdConfig.auth=other", `pmcdConfig.auth "other" is not in pmcdConfig.auths`},
		{"pmcdConfig.auths.fleet.ssh.x=1", "pmcdConfig.auths.fleet.ssh: an auth has tls and sasl"},
	} {
		t.Run(tc.set, func(t *testing.T) {
			out, err := renderRaw(t, "-f", values, "--set", tc.set)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one containing %q", err, tc.want)
			}
			if strings.Contains(string(out), "hunter2") {
				t.Error("the value was rendered")
			}
		})
	}
}

// selfSigned is a certificate and its key, PEM.
func selfSigned(t *testing.T) (cert, key []byte) {
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalPKCS8PrivateKey(k)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb})
}
