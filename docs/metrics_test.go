// Package docs holds the user guide; its tests keep the docs in step with
// the code: docs/metrics.md with the metrics the scheduler exports, the
// user guide's condition reasons, and every stated default of a plugin arg.
package docs

import (
	"context"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	clientmetrics "k8s.io/client-go/tools/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
	// The package phalanx-scheduler's main imports to register client-go's
	// metrics (TestRestClientMetricsDocumented checks that it still does).
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
)

// phalanxMetrics finds every component-base metric the Go code under root
// declares with Namespace "phalanx" (metrics.New*(&metrics.*Opts{...})).
func phalanxMetrics(t *testing.T, root string) map[string]string {
	t.Helper()
	found := map[string]string{}
	goFiles(t, []string{root}, func(path string, f *ast.File) {
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.CompositeLit)
			if !ok {
				return true
			}
			sel, ok := lit.Type.(*ast.SelectorExpr)
			if !ok || !strings.HasSuffix(sel.Sel.Name, "Opts") {
				return true
			}
			fields := map[string]string{}
			for _, e := range lit.Elts {
				kv, ok := e.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				key, _ := kv.Key.(*ast.Ident)
				val, _ := kv.Value.(*ast.BasicLit)
				if key == nil || val == nil || val.Kind != token.STRING {
					continue
				}
				fields[key.Name], _ = strconv.Unquote(val.Value)
			}
			if fields["Namespace"] != "phalanx" || fields["Name"] == "" {
				return true
			}
			parts := []string{"phalanx"}
			if fields["Subsystem"] != "" {
				parts = append(parts, fields["Subsystem"])
			}
			found[strings.Join(append(parts, fields["Name"]), "_")] = path
			return true
		})
	})
	return found
}

var documented = regexp.MustCompile("(?m)^\\| `(phalanx_[a-z_]+)` \\|(.*)$")

func TestMetricsDocumented(t *testing.T) {
	doc, err := os.ReadFile("metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	inDoc := map[string]bool{} // name -> planned
	for _, m := range documented.FindAllStringSubmatch(string(doc), -1) {
		inDoc[m[1]] = strings.Contains(m[2], "(planned)")
	}
	inCode := map[string]string{}
	for _, dir := range []string{"../plugins", "../internal", "../cmd"} {
		for name, path := range phalanxMetrics(t, dir) {
			inCode[name] = path
		}
	}
	if len(inCode) == 0 {
		t.Fatal("found no phalanx metrics in the code; is the scan broken?")
	}
	for name, path := range inCode {
		planned, ok := inDoc[name]
		switch {
		case !ok:
			t.Errorf("%s (%s) is not in docs/metrics.md", name, path)
		case planned:
			t.Errorf("%s is registered (%s): drop \"(planned)\" from docs/metrics.md", name, path)
		}
	}
	var names []string
	for name, planned := range inDoc {
		if _, ok := inCode[name]; !ok && !planned {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		t.Errorf("docs/metrics.md lists %s, which no code registers", name)
	}
}

// clientgoMetrics is the package cmd/phalanx-scheduler imports for client-go's
// request metrics; this test imports it too, so the test's registry holds
// what the scheduler's does.
const clientgoMetrics = "k8s.io/component-base/metrics/prometheus/clientgo"

// clientHooks are client-go's metric hooks (k8s.io/client-go/tools/metrics),
// by variable name. The test calls each so that every registered family has
// a sample; a hook client-go adds fails TestRestClientMetricsDocumented until
// it is listed here.
func clientHooks() map[string]any {
	return map[string]any{
		"ClientCertExpiry":             clientmetrics.ClientCertExpiry,
		"ClientCertRotationAge":        clientmetrics.ClientCertRotationAge,
		"RequestLatency":               clientmetrics.RequestLatency,
		"ResolverLatency":              clientmetrics.ResolverLatency,
		"RequestSize":                  clientmetrics.RequestSize,
		"ResponseSize":                 clientmetrics.ResponseSize,
		"RateLimiterLatency":           clientmetrics.RateLimiterLatency,
		"RequestResult":                clientmetrics.RequestResult,
		"ExecPluginCalls":              clientmetrics.ExecPluginCalls,
		"ExecPluginPolicyCalls":        clientmetrics.ExecPluginPolicyCalls,
		"RequestRetry":                 clientmetrics.RequestRetry,
		"TransportCacheEntries":        clientmetrics.TransportCacheEntries,
		"TransportCreateCalls":         clientmetrics.TransportCreateCalls,
		"TransportCAReloads":           clientmetrics.TransportCAReloads,
		"TransportCertRotationGCCalls": clientmetrics.TransportCertRotationGCCalls,
		"TransportCacheGCCalls":        clientmetrics.TransportCacheGCCalls,
	}
}

// hookNames lists the exported package variables of client-go's
// tools/metrics, read from its source.
func hookNames(t *testing.T) []string {
	t.Helper()
	pkg, err := build.Default.Import("k8s.io/client-go/tools/metrics", ".", 0)
	if err != nil {
		t.Fatalf("locating client-go's tools/metrics: %v", err)
	}
	var names []string
	for _, file := range pkg.GoFiles {
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(pkg.Dir, file), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, spec := range gd.Specs {
				for _, n := range spec.(*ast.ValueSpec).Names {
					if n.IsExported() {
						names = append(names, n.Name)
					}
				}
			}
		}
	}
	slices.Sort(names)
	return names
}

// callHook calls every method of a hook once with placeholder arguments.
func callHook(hook any) {
	v := reflect.ValueOf(hook)
	ctxType := reflect.TypeFor[context.Context]()
	for i := 0; i < v.NumMethod(); i++ {
		m := v.Method(i)
		args := make([]reflect.Value, m.Type().NumIn())
		for j := range args {
			in := m.Type().In(j)
			switch {
			case in == ctxType:
				args[j] = reflect.ValueOf(context.Background())
			case in == reflect.TypeFor[url.URL]():
				args[j] = reflect.ValueOf(url.URL{Scheme: "https", Host: "docs-test", Path: "/api"})
			case in.Kind() == reflect.String:
				args[j] = reflect.ValueOf("docs-test").Convert(in)
			case in.Kind() == reflect.Pointer:
				args[j] = reflect.New(in.Elem())
			default:
				args[j] = reflect.New(in).Elem()
			}
		}
		m.Call(args)
	}
}

// metricsImports returns the component-base metrics packages a main package
// imports.
func metricsImports(t *testing.T, mainFile string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), mainFile, nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		if strings.HasPrefix(path, "k8s.io/component-base/metrics/prometheus/") {
			out = append(out, path)
		}
	}
	return out
}

// restClientRow is a row of docs/metrics.md's rest_client table: name, type,
// the backticked label names of the labels column.
var restClientRow = regexp.MustCompile("(?m)^\\| `(rest_client_[a-z_]+)` \\|([^|]*)\\|([^|]*)\\|")

// TestRestClientMetricsDocumented checks docs/metrics.md against the
// rest_client_* families phalanx-scheduler exports: the scheduler's main
// imports component-base's client-go metrics, which register into the legacy
// registry the scheduler serves; the test imports the same package, drives
// every client-go hook and gathers. Each exported family must be listed with
// its type and labels, and nothing else may be listed.
func TestRestClientMetricsDocumented(t *testing.T) {
	imports := metricsImports(t, "../cmd/phalanx-scheduler/main.go")
	if !slices.Contains(imports, clientgoMetrics) {
		t.Fatalf("cmd/phalanx-scheduler no longer imports %s (imports %v): the scheduler exports no rest_client_* metrics; update docs/metrics.md and this test", clientgoMetrics, imports)
	}
	hooks := clientHooks()
	declared := hookNames(t)
	for _, name := range declared {
		if _, ok := hooks[name]; !ok {
			t.Errorf("client-go's tools/metrics has a new hook %s: add it to clientHooks so its family is checked", name)
		}
	}
	for name := range hooks {
		if !slices.Contains(declared, name) {
			t.Errorf("clientHooks has %s, which client-go's tools/metrics source does not declare (scan broken?)", name)
		}
	}
	for _, h := range hooks {
		callHook(h)
	}
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	type family struct {
		typ    string
		labels []string
	}
	exported := map[string]family{}
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), "rest_client_") {
			continue
		}
		fam := family{typ: strings.ToLower(f.GetType().String())}
		if f.GetType() == dto.MetricType_UNTYPED {
			fam.typ = "gauge"
		}
		if len(f.GetMetric()) > 0 {
			for _, l := range f.GetMetric()[0].GetLabel() {
				fam.labels = append(fam.labels, l.GetName())
			}
		}
		slices.Sort(fam.labels)
		exported[f.GetName()] = fam
	}
	if len(exported) == 0 {
		t.Fatal("no rest_client_* family gathered; is the registration broken?")
	}

	doc, err := os.ReadFile("metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]family{}
	for _, m := range restClientRow.FindAllStringSubmatch(string(doc), -1) {
		fam := family{typ: strings.TrimSpace(m[2])}
		for _, l := range backticked.FindAllStringSubmatch(m[3], -1) {
			fam.labels = append(fam.labels, l[1])
		}
		slices.Sort(fam.labels)
		documented[m[1]] = fam
	}
	var names []string
	for name := range exported {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		want := exported[name]
		got, ok := documented[name]
		switch {
		case !ok:
			t.Errorf("phalanx-scheduler exports %s (%s, labels %v), which docs/metrics.md does not list", name, want.typ, want.labels)
		case got.typ != want.typ:
			t.Errorf("docs/metrics.md: %s is a %s, not a %s", name, want.typ, got.typ)
		case !slices.Equal(got.labels, want.labels):
			t.Errorf("docs/metrics.md: %s has labels %v, not %v", name, want.labels, got.labels)
		}
	}
	names = names[:0]
	for name := range documented {
		if _, ok := exported[name]; !ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		t.Errorf("docs/metrics.md lists %s, which phalanx-scheduler does not export", name)
	}
}
