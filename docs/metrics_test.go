// Package docs holds the user guide; its test keeps docs/metrics.md in step
// with the metrics the code registers.
package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// phalanxMetrics finds every component-base metric the Go code under root
// declares with Namespace "phalanx" (metrics.New*(&metrics.*Opts{...})).
func phalanxMetrics(t *testing.T, root string) map[string]string {
	t.Helper()
	found := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || d.Name() == "generated" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
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
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
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
