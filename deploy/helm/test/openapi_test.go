package test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"
	"sigs.k8s.io/yaml"
)

// kubernetesVersion is the Kubernetes release whose OpenAPI schema the
// manifests are validated against: the one matching k8s.io/api in go.mod.
// Its swagger.json ships in the k8s.io/kubernetes module, which the module
// proxy serves, so no cluster and no other network access is needed.
const kubernetesVersion = "v1.37.2"

// openAPI is the Kubernetes OpenAPI (swagger 2.0) definitions, indexed by
// group/version/kind.
type openAPI struct {
	defs  map[string]any
	byGVK map[string]string

	mu       sync.Mutex
	compiled map[string]*spec.Schema
}

var (
	openAPIOnce sync.Once
	openAPIDoc  *openAPI
	openAPIErr  error
)

// loadOpenAPI reads api/openapi-spec/swagger.json of k8s.io/kubernetes from
// the module cache (go mod download fetches it once through the proxy).
func loadOpenAPI(t *testing.T) *openAPI {
	t.Helper()
	openAPIOnce.Do(func() {
		out, err := exec.Command("go", "mod", "download", "-json", "k8s.io/kubernetes@"+kubernetesVersion).Output()
		if err != nil {
			openAPIErr = fmt.Errorf("go mod download k8s.io/kubernetes@%s: %v", kubernetesVersion, err)
			return
		}
		var mod struct{ Dir, Error string }
		if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
			openAPIErr = fmt.Errorf("go mod download k8s.io/kubernetes@%s: %v %s", kubernetesVersion, err, mod.Error)
			return
		}
		b, err := os.ReadFile(filepath.Join(mod.Dir, "api", "openapi-spec", "swagger.json"))
		if err != nil {
			openAPIErr = err
			return
		}
		var doc struct {
			Definitions map[string]any `json:"definitions"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			openAPIErr = fmt.Errorf("swagger.json: %v", err)
			return
		}
		o := &openAPI{defs: doc.Definitions, byGVK: map[string]string{}, compiled: map[string]*spec.Schema{}}
		for name, d := range doc.Definitions {
			m, _ := d.(map[string]any)
			gvks, _ := m["x-kubernetes-group-version-kind"].([]any)
			for _, g := range gvks {
				gvk, _ := g.(map[string]any)
				key := fmt.Sprintf("%v/%v/%v", gvk["group"], gvk["version"], gvk["kind"])
				o.byGVK[strings.TrimPrefix(key, "/")] = name
			}
		}
		openAPIDoc = o
	})
	if openAPIErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(openAPIErr)
		}
		t.Skip(openAPIErr)
	}
	return openAPIDoc
}

// schema returns the definition for apiVersion and kind with every $ref
// inlined and, as kubeconform -strict does, additionalProperties: false on
// every object schema that lists its properties, so an unknown field fails.
// ok is false for kinds the core schema does not define (custom resources).
func (o *openAPI) schema(apiVersion, kind string) (s *spec.Schema, ok bool, err error) {
	name, ok := o.byGVK[apiVersion+"/"+kind]
	if !ok {
		return nil, false, nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if s := o.compiled[name]; s != nil {
		return s, true, nil
	}
	expanded := o.expand(map[string]any{"$ref": "#/definitions/" + name}, map[string]bool{})
	b, err := json.Marshal(expanded)
	if err != nil {
		return nil, true, err
	}
	s = new(spec.Schema)
	if err := json.Unmarshal(b, s); err != nil {
		return nil, true, fmt.Errorf("schema %s: %v", name, err)
	}
	o.compiled[name] = s
	return s, true, nil
}

func (o *openAPI) expand(node any, seen map[string]bool) any {
	switch n := node.(type) {
	case []any:
		out := make([]any, len(n))
		for i, v := range n {
			out[i] = o.expand(v, seen)
		}
		return out
	case map[string]any:
		if ref, ok := n["$ref"].(string); ok {
			name := strings.TrimPrefix(ref, "#/definitions/")
			switch name {
			case "io.k8s.apimachinery.pkg.util.intstr.IntOrString":
				return map[string]any{"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "integer"}}}
			case "io.k8s.apimachinery.pkg.api.resource.Quantity":
				return map[string]any{"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "number"}}}
			}
			if seen[name] {
				return map[string]any{} // a recursive reference accepts anything below it
			}
			seen[name] = true
			defer delete(seen, name)
			return o.expand(o.defs[name], seen)
		}
		out := make(map[string]any, len(n))
		for k, v := range n {
			switch {
			case k == "description", strings.HasPrefix(k, "x-kubernetes-patch"):
				continue
			case k == "properties":
				props := map[string]any{}
				for p, ps := range v.(map[string]any) {
					props[p] = o.expand(ps, seen)
				}
				out[k] = props
			default:
				out[k] = o.expand(v, seen)
			}
		}
		if _, hasProps := n["properties"]; hasProps && n["additionalProperties"] == nil && n["x-kubernetes-preserve-unknown-fields"] == nil {
			out["additionalProperties"] = false
		}
		return out
	default:
		return node
	}
}

// validateOpenAPI validates every document of a rendered stream against the
// Kubernetes OpenAPI schema, failing t for each violation; it returns the
// number validated and the kinds the schema does not define (custom
// resources, checked by strict decoding only).
func validateOpenAPI(t *testing.T, stream []byte) (n int, custom []string) {
	t.Helper()
	n, custom, errs := validateDocs(loadOpenAPI(t), stream)
	for _, e := range errs {
		t.Error(e)
	}
	return n, custom
}

func validateDocs(o *openAPI, stream []byte) (n int, custom, errs []string) {
	for i, doc := range splitDocuments(stream) {
		j, err := yaml.YAMLToJSON(doc)
		if err != nil {
			errs = append(errs, fmt.Sprintf("document %d: %v", i, err))
			continue
		}
		var obj map[string]any
		if err := json.Unmarshal(j, &obj); err != nil {
			errs = append(errs, fmt.Sprintf("document %d: %v", i, err))
			continue
		}
		if obj == nil {
			continue
		}
		apiVersion, _ := obj["apiVersion"].(string)
		kind, _ := obj["kind"].(string)
		s, ok, err := o.schema(apiVersion, kind)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		if !ok {
			custom = append(custom, kind)
			continue
		}
		res := validate.NewSchemaValidator(s, nil, "", strfmt.Default).Validate(obj)
		for _, e := range res.Errors {
			errs = append(errs, fmt.Sprintf("%s %s (document %d): %v", kind, nameOf(obj), i, e))
		}
		n++
	}
	return n, custom, errs
}

func nameOf(obj map[string]any) string {
	md, _ := obj["metadata"].(map[string]any)
	s, _ := md["name"].(string)
	return s
}

// TestOpenAPI validates every manifest rendered from ci/*-values.yaml, and
// the hand-written examples, against the Kubernetes OpenAPI schema (types,
// formats, required fields, and no unknown fields).
func TestOpenAPI(t *testing.T) {
	for _, f := range ciValues(t) {
		t.Run(strings.TrimSuffix(filepath.Base(f), "-values.yaml"), func(t *testing.T) {
			out, err := renderRaw(t, "-f", f)
			if err != nil {
				t.Fatal(err)
			}
			n, custom := validateOpenAPI(t, out)
			if n == 0 {
				t.Error("no manifest validated")
			}
			t.Logf("%d manifests valid against Kubernetes %s; custom resources (strict decoding only): %v", n, kubernetesVersion, custom)
		})
	}
	examples, _ := filepath.Glob("../../../examples/kubernetes/*.yaml")
	for _, f := range examples {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if n, _ := validateOpenAPI(t, b); n == 0 {
				t.Error("no manifest validated")
			}
		})
	}
}

// TestOpenAPIRejects: the schema validation catches what it must (a missing
// required field, a wrong type, an unknown field), on a known-good manifest.
func TestOpenAPIRejects(t *testing.T) {
	good := `apiVersion: v1
kind: Service
metadata:
  name: x
spec:
  ports:
    - name: http
      port: 9464
      targetPort: http
`
	if n, _ := validateOpenAPI(t, []byte(good)); n != 1 {
		t.Fatalf("good manifest: %d validated", n)
	}
	cases := map[string]string{
		"missing port":  strings.Replace(good, "      port: 9464\n", "", 1),
		"wrong type":    strings.Replace(good, "port: 9464", "port: abc", 1),
		"unknown field": strings.Replace(good, "  ports:", "  portz: []\n  ports:", 1),
	}
	for name, doc := range cases {
		t.Run(name, func(t *testing.T) {
			_, _, errs := validateDocs(loadOpenAPI(t), []byte(doc))
			if len(errs) == 0 {
				t.Errorf("accepted:\n%s", doc)
			} else {
				t.Logf("rejected: %s", errs[0])
			}
		})
	}
}
