package docs

import (
	"fmt"
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
	"unicode"
)

// reasonDirs hold the code that writes the PodGroup's Scheduled condition
// (and the pod events of the same reasons): the gang lifecycle, the plugins'
// status writer, the plugins and adapters, and the controller.
var reasonDirs = []string{"../internal/gang", "../internal/status", "../plugins", "../internal/controller"}

// goFiles calls fn for every non-test, non-generated Go file under the roots.
func goFiles(t *testing.T, roots []string, fn func(path string, f *ast.File)) {
	t.Helper()
	for _, root := range roots {
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
			fn(path, f)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// isReasonConst: Reason followed by an upper-case letter (ReasonScheduled,
// not Reservation...).
func isReasonConst(name string) bool {
	rest, ok := strings.CutPrefix(name, "Reason")
	return ok && rest != "" && unicode.IsUpper(rune(rest[0]))
}

// codeReasons returns every condition reason the code under roots declares,
// value -> where (the Reason* string constants), and the problems that would
// make the list incomplete: reasons written as string literals.
func codeReasons(t *testing.T, roots []string) (map[string]string, []string) {
	t.Helper()
	found := map[string]string{}
	var problems []string
	goFiles(t, roots, func(path string, f *ast.File) {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GenDecl:
				if n.Tok != token.CONST {
					return true
				}
				for _, spec := range n.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, name := range vs.Names {
						if !isReasonConst(name.Name) || i >= len(vs.Values) {
							continue
						}
						if sel, ok := vs.Values[i].(*ast.SelectorExpr); ok && sel.Sel.Name == name.Name {
							continue // the same reason re-exported; read where it is declared
						}
						lit, ok := vs.Values[i].(*ast.BasicLit)
						if !ok || lit.Kind != token.STRING {
							problems = append(problems, fmt.Sprintf("%s: %s is not a string literal; the docs test cannot read it", path, name.Name))
							continue
						}
						v, _ := strconv.Unquote(lit.Value)
						found[v] = path + ": " + name.Name
					}
				}
			case *ast.CompositeLit:
				// The phalanx Condition (not metav1.Condition, which the
				// controller writes on Queues) must name a constant.
				if !isPhalanxCondition(n.Type) {
					return true
				}
				for _, e := range n.Elts {
					kv, ok := e.(*ast.KeyValueExpr)
					if !ok {
						continue
					}
					if key, _ := kv.Key.(*ast.Ident); key != nil && key.Name == "Reason" {
						if lit, ok := kv.Value.(*ast.BasicLit); ok {
							problems = append(problems, fmt.Sprintf("%s: Condition with reason %s written as a literal; declare a Reason* constant so docs/user-guide.md is checked against it", path, lit.Value))
						}
					}
				}
			}
			return true
		})
	})
	return found, problems
}

// reasonsInCode is codeReasons over reasonDirs; problems fail the test.
func reasonsInCode(t *testing.T) map[string]string {
	t.Helper()
	found, problems := codeReasons(t, reasonDirs)
	for _, p := range problems {
		t.Error(p)
	}
	if len(found) == 0 {
		t.Fatal("found no Reason* constants in the code; is the scan broken?")
	}
	return found
}

func isPhalanxCondition(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name == "Condition"
	case *ast.SelectorExpr:
		x, _ := e.X.(*ast.Ident)
		return e.Sel.Name == "Condition" && x != nil && x.Name != "metav1"
	}
	return false
}

var backticked = regexp.MustCompile("`([^`]+)`")

// guideReasons reads the reason table under "## Why is my gang pending?":
// the first backticked word of each row's first cell.
func guideReasons(t *testing.T) map[string]int {
	t.Helper()
	raw, err := os.ReadFile("user-guide.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(raw), "\n")
	start := slices.Index(lines, "## Why is my gang pending?")
	if start < 0 {
		t.Fatal(`docs/user-guide.md has no "## Why is my gang pending?" section`)
	}
	found := map[string]int{}
	inTable := false
	for i := start + 1; i < len(lines); i++ {
		line := lines[i]
		if strings.HasPrefix(line, "## ") {
			break
		}
		if strings.HasPrefix(line, "| reason |") {
			inTable = true
			continue
		}
		if !inTable {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := splitRow(line)
		if len(cells) == 0 || strings.HasPrefix(cells[0], "---") {
			continue
		}
		m := backticked.FindStringSubmatch(cells[0])
		if m == nil {
			t.Errorf("user-guide.md:%d: reason row without a `Reason`: %q", i+1, line)
			continue
		}
		if prev, dup := found[m[1]]; dup {
			t.Errorf("user-guide.md:%d: reason %s listed twice (also line %d)", i+1, m[1], prev)
		}
		found[m[1]] = i + 1
	}
	if len(found) == 0 {
		t.Fatal("docs/user-guide.md: no reason table (| reason | meaning | what to do |) under \"Why is my gang pending?\"")
	}
	return found
}

// splitRow splits a markdown table row into trimmed cells (no escaped pipes
// in these tables).
func splitRow(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(line, "|")
	line = strings.TrimSuffix(line, "|")
	cells := strings.Split(line, "|")
	for i := range cells {
		cells[i] = strings.TrimSpace(cells[i])
	}
	return cells
}

// compareSets reports names only in one of the two sets.
func compareSets(t *testing.T, code map[string]string, doc map[string]int, docName string) {
	t.Helper()
	var missing, stale []string
	for r := range code {
		if _, ok := doc[r]; !ok {
			missing = append(missing, r)
		}
	}
	for r := range doc {
		if _, ok := code[r]; !ok {
			stale = append(stale, r)
		}
	}
	slices.Sort(missing)
	slices.Sort(stale)
	for _, r := range missing {
		t.Errorf("reason %s (%s) is not documented in %s", r, code[r], docName)
	}
	for _, r := range stale {
		t.Errorf("%s lists reason %s (line %d), which the code never writes", docName, r, doc[r])
	}
}

// TestConditionReasonsDocumented keeps the user guide's reason table equal to
// the reasons the code writes, in both directions.
func TestConditionReasonsDocumented(t *testing.T) {
	compareSets(t, reasonsInCode(t), guideReasons(t), "docs/user-guide.md")
}

// TestCoschedulingReadmeReasons keeps the reason list of Coscheduling's
// README (the "Condition `Scheduled`" bullet) equal to the code's.
func TestCoschedulingReadmeReasons(t *testing.T) {
	raw, err := os.ReadFile("../plugins/coscheduling/README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	start := strings.Index(text, "- Condition `Scheduled`")
	if start < 0 {
		t.Fatal("plugins/coscheduling/README.md has no \"- Condition `Scheduled`\" bullet")
	}
	bullet := text[start+len("- Condition `Scheduled`"):]
	if end := strings.Index(bullet, "\n- "); end >= 0 {
		bullet = bullet[:end]
	}
	doc := map[string]int{}
	line := strings.Count(text[:start], "\n") + 1
	for _, m := range backticked.FindAllStringSubmatch(bullet, -1) {
		doc[m[1]] = line
	}
	compareSets(t, reasonsInCode(t), doc, "plugins/coscheduling/README.md")
}

// TestCodeReasonsScan checks the scan itself on a sample: constants are
// found, Reservation* constants are not reasons, and a literal reason in a
// phalanx Condition is reported (metav1.Condition is not ours).
func TestCodeReasonsScan(t *testing.T) {
	dir := t.TempDir()
	src := `package sample

const (
	ReasonFoo       = "Foo"
	ReservationKind = "Starved"
)

type Condition struct{ Reason string }

var _ = Condition{Reason: "Literal"}
var _ = metav1.Condition{Reason: "Valid"}
`
	if err := os.WriteFile(filepath.Join(dir, "sample.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	found, problems := codeReasons(t, []string{dir})
	if len(found) != 1 || found["Foo"] == "" {
		t.Errorf("found %v, want only Foo", found)
	}
	if len(problems) != 1 || !strings.Contains(problems[0], `"Literal"`) {
		t.Errorf("problems %q, want one about \"Literal\"", problems)
	}
}
