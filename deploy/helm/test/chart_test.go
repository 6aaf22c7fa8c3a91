package test

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

const chartDir = "../pcp-exporter"

// helm returns the helm binary: $PCP_EXPORTER_HELM (set by .ci/run from
// scripts/build-helm.sh) or helm in PATH. Missing helm skips the test locally
// and fails it in CI.
func helm(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("PCP_EXPORTER_HELM"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("PCP_EXPORTER_HELM: %v", err)
		}
		return p
	}
	p, err := exec.LookPath("helm")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("helm not found (scripts/build-helm.sh builds it): %v", err)
		}
		t.Skipf("helm not found (run scripts/build-helm.sh and set PCP_EXPORTER_HELM): %v", err)
	}
	return p
}

// render runs helm template with the given extra arguments and returns the
// manifests decoded strictly, or the error of helm or of the decoding.
func render(t *testing.T, args ...string) (*manifests, error) {
	t.Helper()
	out, err := renderRaw(t, args...)
	if err != nil {
		return nil, err
	}
	return decode(out)
}

// renderRaw runs helm template on the chart and returns its output.
func renderRaw(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	return renderChart(t, chartDir, args...)
}

func renderChart(t *testing.T, chart string, args ...string) ([]byte, error) {
	t.Helper()
	h := helm(t)
	home := t.TempDir()
	cmd := exec.Command(h, append([]string{"template", "rel", chart, "--namespace", "monitoring"}, args...)...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("helm template %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes(), nil
}

// manifests holds every rendered object by kind, decoded strictly.
type manifests struct {
	deployments     []appsv1.Deployment
	daemonSets      []appsv1.DaemonSet
	jobs            []batchv1.Job
	cronJobs        []batchv1.CronJob
	services        []corev1.Service
	configMaps      []corev1.ConfigMap
	serviceAccounts []corev1.ServiceAccount
	networkPolicies []networkingv1.NetworkPolicy
	serviceMonitors []monitoringv1.ServiceMonitor
	podMonitors     []monitoringv1.PodMonitor
	kinds           []string
}

// decode splits a helm template stream into documents and decodes each with
// sigs.k8s.io/yaml UnmarshalStrict into its Kubernetes (or prometheus-operator)
// type: an unknown or misplaced field, a wrong value type or a duplicate key
// is an error, as with the API server's strict field validation.
func decode(stream []byte) (*manifests, error) {
	m := &manifests{}
	for i, doc := range splitDocuments(stream) {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return nil, fmt.Errorf("document %d: %v", i, err)
		}
		if tm.APIVersion == "" && tm.Kind == "" {
			continue // only comments
		}
		var target any
		var add func()
		switch tm.APIVersion + "/" + tm.Kind {
		case "apps/v1/Deployment":
			var o appsv1.Deployment
			target, add = &o, func() { m.deployments = append(m.deployments, o) }
		case "apps/v1/DaemonSet":
			var o appsv1.DaemonSet
			target, add = &o, func() { m.daemonSets = append(m.daemonSets, o) }
		case "batch/v1/Job":
			var o batchv1.Job
			target, add = &o, func() { m.jobs = append(m.jobs, o) }
		case "batch/v1/CronJob":
			var o batchv1.CronJob
			target, add = &o, func() { m.cronJobs = append(m.cronJobs, o) }
		case "v1/Service":
			var o corev1.Service
			target, add = &o, func() { m.services = append(m.services, o) }
		case "v1/ConfigMap":
			var o corev1.ConfigMap
			target, add = &o, func() { m.configMaps = append(m.configMaps, o) }
		case "v1/ServiceAccount":
			var o corev1.ServiceAccount
			target, add = &o, func() { m.serviceAccounts = append(m.serviceAccounts, o) }
		case "networking.k8s.io/v1/NetworkPolicy":
			var o networkingv1.NetworkPolicy
			target, add = &o, func() { m.networkPolicies = append(m.networkPolicies, o) }
		case "monitoring.coreos.com/v1/ServiceMonitor":
			var o monitoringv1.ServiceMonitor
			target, add = &o, func() { m.serviceMonitors = append(m.serviceMonitors, o) }
		case "monitoring.coreos.com/v1/PodMonitor":
			var o monitoringv1.PodMonitor
			target, add = &o, func() { m.podMonitors = append(m.podMonitors, o) }
		default:
			return nil, fmt.Errorf("document %d: unexpected kind %s %s", i, tm.APIVersion, tm.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, target); err != nil {
			return nil, fmt.Errorf("document %d (%s): %v", i, tm.Kind, err)
		}
		add()
		m.kinds = append(m.kinds, tm.Kind)
	}
	return m, nil
}

func splitDocuments(b []byte) [][]byte {
	var docs [][]byte
	var cur []string
	for _, line := range strings.Split(string(b), "\n") {
		if line == "---" || strings.HasPrefix(line, "--- ") {
			docs = append(docs, []byte(strings.Join(cur, "\n")))
			cur = cur[:0]
			continue
		}
		cur = append(cur, line)
	}
	return append(docs, []byte(strings.Join(cur, "\n")))
}

// ciValues returns the chart's ci/*-values.yaml files, the cases .ci/run lints.
func ciValues(t *testing.T) []string {
	files, err := filepath.Glob(filepath.Join(chartDir, "ci", "*-values.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no ci/*-values.yaml in %s: %v", chartDir, err)
	}
	return files
}

func renderValues(t *testing.T, file string, set ...string) *manifests {
	t.Helper()
	args := []string{"-f", file}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	m, err := render(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestCIValuesRenderStrict renders every ci/*-values.yaml and checks every
// object: strict decoding, valid names and labels, and the pod-level promises.
func TestCIValuesRenderStrict(t *testing.T) {
	for _, f := range ciValues(t) {
		t.Run(strings.TrimSuffix(filepath.Base(f), "-values.yaml"), func(t *testing.T) {
			m := renderValues(t, f)
			if len(m.kinds) == 0 {
				t.Fatal("nothing rendered")
			}
			for _, p := range m.pods() {
				checkPod(t, p.name, p.spec)
			}
			checkMetadata(t, m)
			checkServices(t, m)
			checkMonitors(t, m)
		})
	}
}

type namedPod struct {
	name   string
	labels map[string]string
	spec   corev1.PodSpec
}

func (m *manifests) pods() []namedPod {
	var ps []namedPod
	for _, d := range m.deployments {
		ps = append(ps, namedPod{"Deployment/" + d.Name, d.Spec.Template.Labels, d.Spec.Template.Spec})
	}
	for _, d := range m.daemonSets {
		ps = append(ps, namedPod{"DaemonSet/" + d.Name, d.Spec.Template.Labels, d.Spec.Template.Spec})
	}
	for _, j := range m.jobs {
		ps = append(ps, namedPod{"Job/" + j.Name, j.Spec.Template.Labels, j.Spec.Template.Spec})
	}
	for _, c := range m.cronJobs {
		ps = append(ps, namedPod{"CronJob/" + c.Name, c.Spec.JobTemplate.Spec.Template.Labels, c.Spec.JobTemplate.Spec.Template.Spec})
	}
	return ps
}

// exporter returns the pcp-exporter container of a pod (a container or a
// native-sidecar init container).
func exporter(t *testing.T, name string, spec corev1.PodSpec) corev1.Container {
	t.Helper()
	for _, c := range append(slices.Clone(spec.Containers), spec.InitContainers...) {
		if c.Name == "pcp-exporter" {
			return c
		}
	}
	t.Fatalf("%s: no pcp-exporter container", name)
	return corev1.Container{}
}

// checkPod checks the restricted Pod Security Standard on the pod and the
// exporter container: non-root, read-only root filesystem, no privilege
// escalation, all capabilities dropped, RuntimeDefault seccomp, no service
// account token.
func checkPod(t *testing.T, name string, spec corev1.PodSpec) {
	t.Helper()
	ps := spec.SecurityContext
	if ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot {
		t.Errorf("%s: pod securityContext.runAsNonRoot is not true", name)
	}
	if ps == nil || ps.RunAsUser == nil || *ps.RunAsUser == 0 {
		t.Errorf("%s: pod securityContext.runAsUser is unset or 0", name)
	}
	if ps == nil || ps.SeccompProfile == nil || ps.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: pod seccompProfile is not RuntimeDefault", name)
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Errorf("%s: automountServiceAccountToken is not false", name)
	}
	if spec.HostNetwork || spec.HostIPC {
		t.Errorf("%s: hostNetwork/hostIPC set", name)
	}
	c := exporter(t, name, spec)
	sc := c.SecurityContext
	if sc == nil {
		t.Fatalf("%s: exporter container has no securityContext", name)
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("%s: readOnlyRootFilesystem is not true", name)
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("%s: allowPrivilegeEscalation is not false", name)
	}
	if sc.Privileged != nil && *sc.Privileged {
		t.Errorf("%s: privileged", name)
	}
	if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Errorf("%s: container runAsNonRoot is not true", name)
	}
	if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 {
		t.Errorf("%s: capabilities are %+v, want drop [ALL] and no add", name, sc.Capabilities)
	}
	if sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: container seccompProfile is not RuntimeDefault", name)
	}
	// Every volume mount of the exporter is read-only and names a pod volume.
	vols := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		vols[v.Name] = v
	}
	for _, vm := range c.VolumeMounts {
		if !vm.ReadOnly {
			t.Errorf("%s: exporter mount %s (%s) is not read-only", name, vm.Name, vm.MountPath)
		}
		if _, ok := vols[vm.Name]; !ok {
			t.Errorf("%s: exporter mounts %s, which is not a pod volume", name, vm.Name)
		}
	}
	for _, v := range spec.Volumes {
		if v.HostPath != nil && !strings.HasPrefix(name, "DaemonSet/") {
			t.Errorf("%s: hostPath volume %s outside the DaemonSet", name, v.Name)
		}
	}
	for _, ctr := range append(slices.Clone(spec.Containers), spec.InitContainers...) {
		for _, p := range ctr.Ports {
			if errs := validation.IsValidPortName(p.Name); len(errs) > 0 {
				t.Errorf("%s: container %s port name %q: %v", name, ctr.Name, p.Name, errs)
			}
		}
	}
}

func checkMetadata(t *testing.T, m *manifests) {
	t.Helper()
	var metas []metav1.ObjectMeta
	for _, o := range m.deployments {
		metas = append(metas, o.ObjectMeta)
	}
	for _, o := range m.daemonSets {
		metas = append(metas, o.ObjectMeta)
	}
	for _, o := range m.jobs {
		metas = append(metas, o.ObjectMeta)
	}
	for _, o := range m.cronJobs {
		metas = append(metas, o.ObjectMeta)
		if errs := validation.IsDNS1123Label(o.Name); len(errs) > 0 || len(o.Name) > 52 {
			t.Errorf("CronJob name %q: %v (at most 52 characters)", o.Name, errs)
		}
	}
	for _, o := range m.services {
		metas = append(metas, o.ObjectMeta)
		if errs := validation.IsDNS1035Label(o.Name); len(errs) > 0 {
			t.Errorf("Service name %q: %v", o.Name, errs)
		}
	}
	for _, o := range m.configMaps {
		metas = append(metas, o.ObjectMeta)
	}
	for _, o := range m.serviceAccounts {
		metas = append(metas, o.ObjectMeta)
	}
	for _, o := range m.networkPolicies {
		metas = append(metas, o.ObjectMeta)
	}
	for _, o := range m.serviceMonitors {
		metas = append(metas, o.ObjectMeta)
	}
	for _, o := range m.podMonitors {
		metas = append(metas, o.ObjectMeta)
	}
	for _, md := range metas {
		if errs := validation.IsDNS1123Subdomain(md.Name); len(errs) > 0 {
			t.Errorf("name %q: %v", md.Name, errs)
		}
		if md.Namespace != "monitoring" {
			t.Errorf("%s: namespace %q, want the release namespace", md.Name, md.Namespace)
		}
		for k, v := range md.Labels {
			if errs := validation.IsQualifiedName(k); len(errs) > 0 {
				t.Errorf("%s: label key %q: %v", md.Name, k, errs)
			}
			if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
				t.Errorf("%s: label %s=%q: %v", md.Name, k, v, errs)
			}
		}
	}
}

// checkServices: each Service selects the pods of a rendered workload and
// targets a named port of its exporter.
func checkServices(t *testing.T, m *manifests) {
	t.Helper()
	for _, s := range m.services {
		matched := false
		for _, p := range m.pods() {
			if !selects(s.Spec.Selector, p.labels) {
				continue
			}
			matched = true
			c := exporter(t, p.name, p.spec)
			for _, sp := range s.Spec.Ports {
				if !hasPort(c, sp.TargetPort.String()) {
					t.Errorf("Service %s targets port %s, which %s's exporter does not expose", s.Name, sp.TargetPort.String(), p.name)
				}
			}
		}
		if !matched {
			t.Errorf("Service %s selects no rendered pod (selector %v)", s.Name, s.Spec.Selector)
		}
	}
}

func checkMonitors(t *testing.T, m *manifests) {
	t.Helper()
	for _, pm := range m.podMonitors {
		for _, e := range pm.Spec.PodMetricsEndpoints {
			if e.Port == nil || *e.Port == "" {
				t.Errorf("PodMonitor %s: endpoint without a port name", pm.Name)
				continue
			}
			for _, p := range m.pods() {
				if selects(pm.Spec.Selector.MatchLabels, p.labels) && !hasPort(exporter(t, p.name, p.spec), *e.Port) {
					t.Errorf("PodMonitor %s: port %s not exposed by %s", pm.Name, *e.Port, p.name)
				}
			}
		}
	}
	for _, sm := range m.serviceMonitors {
		found := false
		for _, s := range m.services {
			if !selects(sm.Spec.Selector.MatchLabels, s.Labels) {
				continue
			}
			found = true
			for _, e := range sm.Spec.Endpoints {
				if !slices.ContainsFunc(s.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == e.Port }) {
					t.Errorf("ServiceMonitor %s: port %q not a port of Service %s", sm.Name, e.Port, s.Name)
				}
			}
		}
		if !found {
			t.Errorf("ServiceMonitor %s selects no rendered Service", sm.Name)
		}
	}
}

func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func hasPort(c corev1.Container, nameOrNumber string) bool {
	for _, p := range c.Ports {
		if p.Name == nameOrNumber || strconv.Itoa(int(p.ContainerPort)) == nameOrNumber {
			return true
		}
	}
	return false
}

// flagValue returns the value of --name=VALUE in args and whether it is there.
func flagValue(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// TestSidecar checks the example Deployment's sidecar: the shared emptyDir
// mounted read-write by the application and read-only by the exporter at the
// directory given to --mmv.dir, the PID check off unless the process
// namespace is shared, the listen port and probes.
func TestSidecar(t *testing.T) {
	cases := []struct {
		file       string
		set        []string
		pidCheck   bool
		native     bool
		wantMedium corev1.StorageMedium
	}{
		{file: "sidecar-values.yaml", pidCheck: false},
		{file: "sidecar-shared-pid-values.yaml", pidCheck: true, native: true, wantMedium: corev1.StorageMediumMemory},
		{file: "sidecar-values.yaml", set: []string{"mmv.pidCheck=true"}, pidCheck: true},
		{file: "sidecar-shared-pid-values.yaml", set: []string{"mmv.pidCheck=false", "sidecar.nativeSidecar=false"}, pidCheck: false, wantMedium: corev1.StorageMediumMemory},
	}
	for _, tc := range cases {
		t.Run(strings.Join(append([]string{tc.file}, tc.set...), ","), func(t *testing.T) {
			m := renderValues(t, filepath.Join(chartDir, "ci", tc.file), tc.set...)
			if len(m.deployments) != 1 {
				t.Fatalf("%d Deployments, want the example", len(m.deployments))
			}
			spec := m.deployments[0].Spec.Template.Spec
			c := exporter(t, "example", spec)
			isInit := slices.ContainsFunc(spec.InitContainers, func(c corev1.Container) bool { return c.Name == "pcp-exporter" })
			if isInit != tc.native {
				t.Errorf("exporter is an init container: %v, want %v", isInit, tc.native)
			}
			if tc.native && (c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways) {
				t.Errorf("native sidecar without restartPolicy Always")
			}
			shared := spec.ShareProcessNamespace != nil && *spec.ShareProcessNamespace
			if c.Args[0] != "serve" {
				t.Errorf("args %q do not start with serve", c.Args)
			}
			hasOn, hasOff := slices.Contains(c.Args, "--mmv.pid-check"), slices.Contains(c.Args, "--no-mmv.pid-check")
			if hasOn == hasOff || hasOn != tc.pidCheck {
				t.Errorf("args %q: want PID check %v (shareProcessNamespace %v)", c.Args, tc.pidCheck, shared)
			}
			if tc.pidCheck && !shared && !slices.Contains(tc.set, "mmv.pidCheck=true") {
				t.Errorf("PID check on without shareProcessNamespace")
			}
			dir, ok := flagValue(c.Args, "mmv.dir")
			if !ok {
				t.Fatalf("args %q: no --mmv.dir", c.Args)
			}
			var mmvMount *corev1.VolumeMount
			for i, vm := range c.VolumeMounts {
				if vm.MountPath == dir {
					mmvMount = &c.VolumeMounts[i]
				}
			}
			if mmvMount == nil || !mmvMount.ReadOnly {
				t.Fatalf("exporter does not mount --mmv.dir %s read-only: %+v", dir, c.VolumeMounts)
			}
			var vol *corev1.Volume
			for i, v := range spec.Volumes {
				if v.Name == mmvMount.Name {
					vol = &spec.Volumes[i]
				}
			}
			if vol == nil || vol.EmptyDir == nil {
				t.Fatalf("MMV volume %s is not an emptyDir: %+v", mmvMount.Name, vol)
			}
			if vol.EmptyDir.Medium != tc.wantMedium {
				t.Errorf("emptyDir medium %q, want %q", vol.EmptyDir.Medium, tc.wantMedium)
			}
			// The application writes into the same volume at the same path, with
			// PCP_TMP_DIR pointing at its parent (libpcp_mmv and speed append mmv/).
			app := spec.Containers[0]
			if app.Name == "pcp-exporter" {
				t.Fatalf("first container is the exporter, want the application")
			}
			if !slices.ContainsFunc(app.VolumeMounts, func(vm corev1.VolumeMount) bool {
				return vm.Name == mmvMount.Name && vm.MountPath == dir && !vm.ReadOnly
			}) {
				t.Errorf("application does not mount %s read-write at %s: %+v", mmvMount.Name, dir, app.VolumeMounts)
			}
			if !slices.ContainsFunc(app.Env, func(e corev1.EnvVar) bool { return e.Name == "PCP_TMP_DIR" && e.Value+"/mmv" == dir }) {
				t.Errorf("application env %+v: want PCP_TMP_DIR=%s", app.Env, strings.TrimSuffix(dir, "/mmv"))
			}
			checkListenAndProbes(t, c)
		})
	}
}

func checkListenAndProbes(t *testing.T, c corev1.Container) {
	t.Helper()
	addr, ok := flagValue(c.Args, "web.listen-address")
	if !ok {
		t.Fatalf("args %q: no --web.listen-address", c.Args)
	}
	_, port, _ := strings.Cut(addr, ":")
	if len(c.Ports) != 1 || strconv.Itoa(int(c.Ports[0].ContainerPort)) != port {
		t.Errorf("listen address %s but container ports %+v", addr, c.Ports)
	}
	for _, p := range []struct {
		probe *corev1.Probe
		path  string
	}{{c.LivenessProbe, "/-/healthy"}, {c.ReadinessProbe, "/-/ready"}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("no HTTP probe for %s", p.path)
			continue
		}
		if p.probe.HTTPGet.Path != p.path || !hasPort(c, p.probe.HTTPGet.Port.String()) {
			t.Errorf("probe %+v, want %s on the exporter's port", p.probe.HTTPGet, p.path)
		}
	}
}

// TestDefaultRendersExporter: a default helm template renders a running
// exporter (a DaemonSet serving the node's pmcd and MMV directory, its
// Service); sidecar mode renders only the ServiceAccount beside its named
// templates (for users' pod specs).
func TestDefaultRendersExporter(t *testing.T) {
	m, err := render(t)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(m.kinds, "DaemonSet") || !slices.Contains(m.kinds, "Service") {
		t.Fatalf("default values render %v, want a DaemonSet and its Service", m.kinds)
	}
	out, err := renderRaw(t)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--pmcd=unix:/run/pcp/pmcd.socket", "path: /run/pcp", "path: /var/lib/pcp/tmp/mmv"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("default values render no %q", want)
		}
	}
	m, err = render(t, "--set", "mode=sidecar")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(m.kinds, []string{"ServiceAccount"}) {
		t.Errorf("mode=sidecar renders %v, want only the ServiceAccount", m.kinds)
	}
}

// TestChartCitesExistingFiles: every *.md file the chart's files name
// exists in the chart or the repository.
func TestChartCitesExistingFiles(t *testing.T) {
	cite := regexp.MustCompile(`[A-Za-z0-9_./-]+\.md\b`)
	err := filepath.WalkDir(chartDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, c := range cite.FindAllString(string(b), -1) {
			_, e1 := os.Stat(filepath.Join(chartDir, c))
			_, e2 := os.Stat(filepath.Join("..", "..", "..", c))
			if e1 != nil && e2 != nil {
				t.Errorf("%s cites %s, which exists neither in the chart nor in the repository", path, c)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestDaemonSet: hostPath MMV directory and archives, read-only; PID check
// follows hostPID; --archive for replayed archives.
func TestDaemonSet(t *testing.T) {
	cases := []struct {
		file     string
		hostPID  bool
		archives []string
		pmcd     bool // the node's pmcd socket directory mounted, --pmcd given
	}{
		{file: "daemonset-values.yaml"},
		{file: "daemonset-hostpid-values.yaml", hostPID: true, archives: []string{"/var/log/pcp/pmlogger/node1/20261122"}},
		{file: "daemonset-pmcd-values.yaml", pmcd: true},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			m := renderValues(t, filepath.Join(chartDir, "ci", tc.file))
			if len(m.daemonSets) != 1 {
				t.Fatalf("%d DaemonSets, want 1", len(m.daemonSets))
			}
			spec := m.daemonSets[0].Spec.Template.Spec
			if spec.HostPID != tc.hostPID {
				t.Errorf("hostPID %v, want %v", spec.HostPID, tc.hostPID)
			}
			c := exporter(t, "daemonset", spec)
			if tc.hostPID != slices.Contains(c.Args, "--mmv.pid-check") || tc.hostPID == slices.Contains(c.Args, "--no-mmv.pid-check") {
				t.Errorf("args %q: PID check should be %v", c.Args, tc.hostPID)
			}
			want := map[string]string{"pcp-mmv": "/var/lib/pcp/tmp/mmv", "pcp-archives": "/var/log/pcp/pmlogger"}
			if tc.pmcd {
				want = map[string]string{"pcp-mmv": "/var/lib/pcp/tmp/mmv", "pcp-pmcd": "/run/pcp"}
			}
			pmcdFlag, _ := flagValue(c.Args, "pmcd")
			if tc.pmcd != (pmcdFlag == "unix:/run/pcp/pmcd.socket") {
				t.Errorf("args %q: --pmcd should be given: %v", c.Args, tc.pmcd)
			}
			for _, vm := range c.VolumeMounts {
				if vm.Name == "pcp-pmcd" && (!tc.pmcd || vm.MountPath != "/run/pcp" || !vm.ReadOnly) {
					t.Errorf("pmcd socket mount %+v", vm)
				}
			}
			for _, v := range spec.Volumes {
				if p, ok := want[v.Name]; ok {
					if v.HostPath == nil || v.HostPath.Path != p {
						t.Errorf("volume %s: %+v, want hostPath %s", v.Name, v.VolumeSource, p)
					}
					delete(want, v.Name)
				}
			}
			if len(want) != 0 {
				t.Errorf("missing hostPath volumes %v", want)
			}
			dir, _ := flagValue(c.Args, "mmv.dir")
			if dir != "/var/lib/pcp/tmp/mmv" {
				t.Errorf("--mmv.dir=%s", dir)
			}
			var got []string
			for _, a := range c.Args {
				if v, ok := strings.CutPrefix(a, "--archive="); ok {
					got = append(got, v)
				}
			}
			if !slices.Equal(got, tc.archives) {
				t.Errorf("--archive flags %q, want %q", got, tc.archives)
			}
			checkListenAndProbes(t, c)
		})
	}
}

// TestBackfillSharding: the Indexed Job's completions each read the archives
// of their shard from a ConfigMap file named by the completion index; the
// shards partition the archive list (archive k in shard k mod n).
func TestBackfillSharding(t *testing.T) {
	file := filepath.Join(chartDir, "ci", "backfill-values.yaml")
	archives := []string{"host1/20261120", "host1/20261121", "host2/20261120", "host2/20261121", "host3/20261121"}
	for _, shards := range []int{1, 2, 3, 5} {
		t.Run(strconv.Itoa(shards), func(t *testing.T) {
			m := renderValues(t, file, "backfill.shards="+strconv.Itoa(shards))
			if len(m.jobs) != 1 || len(m.cronJobs) != 1 {
				t.Fatalf("%d Jobs and %d CronJobs, want 1 and 1", len(m.jobs), len(m.cronJobs))
			}
			j := m.jobs[0]
			if j.Spec.CompletionMode == nil || *j.Spec.CompletionMode != batchv1.IndexedCompletion {
				t.Errorf("completionMode %v, want Indexed", j.Spec.CompletionMode)
			}
			if j.Spec.Completions == nil || int(*j.Spec.Completions) != shards {
				t.Errorf("completions %v, want %d", j.Spec.Completions, shards)
			}
			if j.Spec.Parallelism == nil || int(*j.Spec.Parallelism) > shards {
				t.Errorf("parallelism %v exceeds %d completions", j.Spec.Parallelism, shards)
			}
			c := exporter(t, "job", j.Spec.Template.Spec)
			if c.Args[0] != "backfill" {
				t.Errorf("args %q do not start with backfill", c.Args)
			}
			if out, _ := flagValue(c.Args, "output"); !strings.HasPrefix(out, "remote-write:http") {
				t.Errorf("--output=%q", out)
			}
			at := c.Args[len(c.Args)-1]
			if at != "@/etc/pcp-exporter-shards/shard-$(SHARD_INDEX)" {
				t.Errorf("last arg %q, want the shard's @file", at)
			}
			if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
				return e.Name == "SHARD_INDEX" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil &&
					e.ValueFrom.FieldRef.FieldPath == "metadata.annotations['batch.kubernetes.io/job-completion-index']"
			}) {
				t.Errorf("no SHARD_INDEX from the completion-index annotation: %+v", c.Env)
			}
			var cm *corev1.ConfigMap
			for i := range m.configMaps {
				if strings.HasSuffix(m.configMaps[i].Name, "-shards") {
					cm = &m.configMaps[i]
				}
			}
			if cm == nil {
				t.Fatal("no shards ConfigMap")
			}
			var all []string
			for i := range shards {
				lines := strings.Fields(cm.Data["shard-"+strconv.Itoa(i)])
				if len(lines) == 0 {
					t.Errorf("shard %d is empty", i)
				}
				for _, l := range lines {
					k := slices.Index(archives, strings.TrimPrefix(l, "/archives/"))
					if k < 0 || k%shards != i {
						t.Errorf("shard %d holds %s", i, l)
					}
					all = append(all, strings.TrimPrefix(l, "/archives/"))
				}
			}
			if len(cm.Data) != shards {
				t.Errorf("%d shard files, want %d", len(cm.Data), shards)
			}
			sort.Strings(all)
			if !slices.Equal(all, archives) {
				t.Errorf("shards hold %q, want each of %q once", all, archives)
			}
			cj := exporter(t, "cronjob", m.cronJobs[0].Spec.JobTemplate.Spec.Template.Spec)
			if cj.Args[0] != "backfill" || !slices.Contains(cj.Args, "/archives/host1/latest") {
				t.Errorf("CronJob args %q", cj.Args)
			}
		})
	}
}

// TestRejects: values the chart must refuse, and a manifest the strict
// decoding must refuse (an unknown field smuggled in through extraVolumes).
func TestRejects(t *testing.T) {
	backfill := filepath.Join(chartDir, "ci", "backfill-values.yaml")
	sidecar := filepath.Join(chartDir, "ci", "sidecar-values.yaml")
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"bad mode", []string{"--set", "mode=proxy"}, "mode must be sidecar, daemonset or backfill"},
		{"bad pidCheck", []string{"--set", "mode=daemonset", "--set", "mmv.pidCheck=maybe"}, "mmv.pidCheck must be auto, true or false"},
		{"more shards than archives", []string{"-f", backfill, "--set", "backfill.shards=6"}, "exceeds the number of archives"},
		{"no output", []string{"-f", backfill, "--set", "backfill.output="}, "backfill.output is required"},
		{"unknown field", []string{"-f", sidecar, "--set-json", `extraVolumes=[{"name":"x","emptyDir":{},"bogusField":1}]`}, `unknown field "bogusField"`},
		{"wrong type", []string{"-f", sidecar, "--set", "web.port=abc"}, "cannot unmarshal"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := render(t, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestExampleManifests decodes the hand-written manifests of
// examples/kubernetes strictly and holds them to the chart's pod rules, so the
// example users copy is as strict as the chart.
func TestExampleManifests(t *testing.T) {
	files, err := filepath.Glob("../../../examples/kubernetes/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples/kubernetes/*.yaml: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			m, err := decode(b)
			if err != nil {
				t.Fatal(err)
			}
			if len(m.pods()) == 0 {
				t.Fatal("no workload")
			}
			for _, p := range m.pods() {
				checkPod(t, p.name, p.spec)
				c := exporter(t, p.name, p.spec)
				checkListenAndProbes(t, c)
				shared := p.spec.ShareProcessNamespace != nil && *p.spec.ShareProcessNamespace
				if !shared && !slices.Contains(c.Args, "--no-mmv.pid-check") {
					t.Errorf("%s: PID check on without shareProcessNamespace: %q", p.name, c.Args)
				}
			}
			for _, pm := range m.podMonitors {
				for _, p := range m.pods() {
					if selects(pm.Spec.Selector.MatchLabels, p.labels) {
						for _, e := range pm.Spec.PodMetricsEndpoints {
							if e.Port == nil || !hasPort(exporter(t, p.name, p.spec), *e.Port) {
								t.Errorf("PodMonitor %s: port %v not exposed by %s", pm.Name, e.Port, p.name)
							}
						}
					}
				}
			}
		})
	}
}

// TestParentChart: an application chart with pcp-exporter as a dependency
// puts the sidecar into its own pod spec with the named templates, reaching
// the dependency's values and chart through .Subcharts
// (testdata/parent/templates/deployment.yaml, the usage values.yaml documents).
func TestParentChart(t *testing.T) {
	out, err := renderChart(t, "testdata/parent")
	if err != nil {
		t.Fatal(err)
	}
	m, err := decode(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.deployments) != 1 {
		t.Fatalf("%d Deployments, want the application's", len(m.deployments))
	}
	spec := m.deployments[0].Spec.Template.Spec
	checkPod(t, "parent", spec)
	c := exporter(t, "parent", spec)
	checkListenAndProbes(t, c)
	if !slices.Contains(c.Args, "--no-mmv.pid-check") {
		t.Errorf("args %q: PID check on without shareProcessNamespace", c.Args)
	}
	if c.Resources.Limits.Memory().String() != "64Mi" {
		t.Errorf("the parent's pcp-exporter values did not reach the sidecar: resources %+v", c.Resources)
	}
	if n, _ := validateOpenAPI(t, out); n == 0 {
		t.Error("nothing validated against the OpenAPI schema")
	}
}
