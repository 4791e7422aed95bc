// Command sizes reports what passes the house limits: a package over 1.5k
// source lines, a file over 600, a function over 100 (tests and generated
// code aside). With -check it exits 1 when anything outside the allowances
// file does.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

const (
	maxPackage  = 1500
	maxFile     = 600
	maxFunction = 100
)

type pkg struct{ source, test int }

func generated(path string) bool {
	return strings.Contains(path, "zz_generated") || strings.HasSuffix(path, ".pb.go") ||
		strings.Contains(path, "/generated/") || strings.HasPrefix(path, "pkg/generated/")
}

func main() {
	check := flag.Bool("check", false, "exit 1 on anything over a limit not in -allow")
	allow := flag.String("allow", "hack/sizes/allowed.txt", "lines naming what may still pass a limit (the report's first two fields)")
	flag.Parse()
	allowed := map[string]bool{}
	if f, err := os.Open(*allow); err == nil {
		s := bufio.NewScanner(f)
		for s.Scan() {
			if l := strings.TrimSpace(s.Text()); l != "" && !strings.HasPrefix(l, "#") {
				allowed[l] = true
			}
		}
		f.Close()
	}
	fset := token.NewFileSet()
	pkgs := map[string]*pkg{}
	var over []string
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "bin" || d.Name() == "vendor" || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || generated(p) {
			return nil
		}
		dir := filepath.Dir(p)
		if pkgs[dir] == nil {
			pkgs[dir] = &pkg{}
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			return err
		}
		lines := fset.File(f.Pos()).LineCount()
		if strings.HasSuffix(p, "_test.go") {
			pkgs[dir].test += lines
			return nil
		}
		pkgs[dir].source += lines
		if lines > maxFile {
			over = append(over, fmt.Sprintf("file %s %d", p, lines))
		}
		for _, decl := range f.Decls {
			if fd, ok := decl.(*ast.FuncDecl); ok && fd.Body != nil {
				n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
				if n > maxFunction {
					over = append(over, fmt.Sprintf("func %s.%s %d", p, fd.Name.Name, n))
				}
			}
		}
		return nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	for dir, p := range pkgs {
		if p.source > maxPackage {
			over = append(over, fmt.Sprintf("package %s %d", dir, p.source))
		}
	}
	sort.Strings(over)
	failed := false
	seen := map[string]bool{}
	for _, o := range over {
		key := strings.Join(strings.Fields(o)[:2], " ")
		seen[key] = true
		mark := ""
		if !allowed[key] {
			mark, failed = " (not allowed)", true
		}
		if !*check || mark != "" {
			fmt.Println(o + mark)
		}
	}
	// An allowance that is no longer needed goes, so the list only shrinks.
	var stale []string
	for key := range allowed {
		if !seen[key] {
			stale = append(stale, key)
		}
	}
	sort.Strings(stale)
	for _, key := range stale {
		fmt.Printf("%s: within the limits now; remove it from %s\n", key, *allow)
		failed = true
	}
	if *check && failed {
		fmt.Fprintf(os.Stderr, "sizes: over the limits (package %d, file %d, function %d lines); split it, do not raise the limit\n", maxPackage, maxFile, maxFunction)
		os.Exit(1)
	}
}
