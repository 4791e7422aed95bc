package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	configv1 "github.com/phalanx-sched/phalanx/apis/config/v1"
)

// argDefault is one plugin arg and the value the code gives it when unset.
type argDefault struct {
	plugin, arg, value string
}

// codeDefaults runs the real v1 defaulting (the scheme's defaulter, as
// kube-scheduler's config decoding does) on an empty object of every phalanx
// args kind and reads the fields back by their json names. Keyed by arg.
func codeDefaults(t *testing.T) map[string]argDefault {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := configv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	pkg := reflect.TypeFor[configv1.CoschedulingArgs]().PkgPath()
	out := map[string]argDefault{}
	for gvk, typ := range scheme.AllKnownTypes() {
		if typ.PkgPath() != pkg || !strings.HasSuffix(gvk.Kind, "Args") {
			continue
		}
		obj := reflect.New(typ).Interface().(runtime.Object)
		scheme.Default(obj)
		v := reflect.ValueOf(obj).Elem()
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			if f.Anonymous {
				continue // TypeMeta
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				t.Fatalf("%s.%s has no json name", gvk.Kind, f.Name)
			}
			fv := v.Field(i)
			if fv.Kind() == reflect.Pointer {
				if fv.IsNil() {
					t.Fatalf("%s.%s is not defaulted; the docs check needs a default for every arg", gvk.Kind, name)
				}
				fv = fv.Elem()
			}
			if prev, dup := out[name]; dup {
				t.Fatalf("arg %s is in %s and %s; the docs check keys args by name", name, prev.plugin, gvk.Kind)
			}
			out[name] = argDefault{plugin: strings.TrimSuffix(gvk.Kind, "Args"), arg: name, value: fmt.Sprint(fv.Interface())}
		}
	}
	if len(out) == 0 {
		t.Fatal("no phalanx args kinds in the scheme")
	}
	return out
}

// defaultDocs are the files whose statements about arg defaults are checked.
func defaultDocs(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, pattern := range []string{
		"../README.md", "*.md", "../plugins/*/README.md",
		"../charts/phalanx/README.md", "../charts/phalanx/values*.yaml",
		"../manifests/scheduler-config.yaml", "../examples/README.md",
	} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 5 {
		t.Fatalf("found only %v", files)
	}
	return files
}

// statement is a sentence of prose, a table row, or a line of code (YAML,
// shell) with its comment, in which a stated default is looked for.
type statement struct {
	line int
	text string
	// claimFrom: claims are read only from text[claimFrom:] (the comment of
	// a code line: `key: value  # default ...`).
	claimFrom int
	// key is the YAML key a comment documents (the next key line), used when
	// the statement names no arg itself.
	key string
	// breaks are the offsets in text where lines line+1, line+2, ... start
	// (a sentence wrapped over several lines).
	breaks []int
}

// lineAt is the file line of offset i of the statement's text.
func (s statement) lineAt(i int) int {
	n := s.line
	for _, b := range s.breaks {
		if i >= b {
			n++
		}
	}
	return n
}

// joinLines joins wrapped lines with spaces and records where each starts.
func joinLines(lines []string) (string, []int) {
	var b strings.Builder
	var breaks []int
	for i, l := range lines {
		if i > 0 {
			b.WriteByte(' ')
			breaks = append(breaks, b.Len())
		}
		b.WriteString(l)
	}
	return b.String(), breaks
}

var (
	yamlKey    = regexp.MustCompile(`^\s*-?\s*([A-Za-z][A-Za-z0-9_.-]*)\s*:`)
	fence      = regexp.MustCompile("^\\s*```")
	sentenceAt = regexp.MustCompile("[.!?]\\s+[A-Z`(]")
)

// commentStart is where a code line's comment starts (-1 if none).
func commentStart(line string) int {
	trimmed := strings.TrimLeft(line, " \t")
	if strings.HasPrefix(trimmed, "#") {
		return len(line) - len(trimmed)
	}
	if i := strings.Index(line, " #"); i >= 0 {
		return i + 1
	}
	return -1
}

// sentences splits a paragraph (lines, the first at line) into sentences.
func sentences(lines []string, line int) []statement {
	text, breaks := joinLines(lines)
	para := statement{line: line, breaks: breaks}
	var out []statement
	sentence := func(from, to int) {
		if strings.TrimSpace(text[from:to]) == "" {
			return
		}
		s := statement{line: para.lineAt(from), text: text[from:to]}
		for _, b := range breaks {
			if b > from && b < to {
				s.breaks = append(s.breaks, b-from)
			}
		}
		out = append(out, s)
	}
	from := 0
	for _, loc := range sentenceAt.FindAllStringIndex(text, -1) {
		sentence(from, loc[0]+1)
		from = loc[1] - 1
	}
	sentence(from, len(text))
	return out
}

// markdownStatements splits a markdown file: prose paragraphs into
// sentences, table rows and code lines one by one.
func markdownStatements(src string) []statement {
	var out []statement
	lines := strings.Split(src, "\n")
	var para []string
	paraLine := 0
	flush := func() {
		if len(para) > 0 {
			out = append(out, sentences(para, paraLine)...)
		}
		para = nil
	}
	inCode := false
	for i, l := range lines {
		n := i + 1
		switch {
		case fence.MatchString(l):
			flush()
			inCode = !inCode
		case inCode:
			if c := commentStart(l); c >= 0 {
				out = append(out, statement{line: n, text: l, claimFrom: c})
			}
		case strings.TrimSpace(l) == "", strings.HasPrefix(l, "#"):
			flush()
		case strings.HasPrefix(strings.TrimSpace(l), "|"):
			flush()
			out = append(out, statement{line: n, text: l})
		default:
			if strings.HasPrefix(strings.TrimSpace(l), "- ") || len(para) == 0 {
				flush()
				paraLine = n
			}
			para = append(para, strings.TrimSpace(l))
		}
	}
	flush()
	return out
}

// yamlStatements splits a YAML file: each run of comment lines is prose
// documenting the key on the next line; a key line's own trailing comment is
// a statement of that key.
func yamlStatements(src string) []statement {
	var out []statement
	lines := strings.Split(src, "\n")
	var run []string
	runLine := 0
	for i, l := range lines {
		trimmed := strings.TrimSpace(l)
		if strings.HasPrefix(trimmed, "#") {
			if len(run) == 0 {
				runLine = i + 1
			}
			run = append(run, strings.TrimSpace(strings.TrimPrefix(trimmed, "#")))
			continue
		}
		key := ""
		if m := yamlKey.FindStringSubmatch(l); m != nil {
			key = m[1]
		}
		for _, s := range sentences(run, runLine) {
			s.key = key
			out = append(out, s)
		}
		run = nil
		if c := commentStart(l); c >= 0 && trimmed != "" {
			out = append(out, statement{line: i + 1, text: l, claimFrom: c, key: key})
		}
	}
	out = append(out, sentences(run, runLine)...)
	return out
}

// claim is a stated default: the arg it is about ("" when the statement
// names none) and the value.
type claim struct {
	arg, value string
	at         int
}

var (
	keyword = regexp.MustCompile(`\b[Dd]efault\b`)
	// after the keyword: "default 30", "default: `AdmitAll`", "default is
	// true", "(default `default`)", "default (`arg: value`)", "default:
	// AdmitAll" (a bare CamelCase word only where the phrase ends, so that
	// "by default NUMATopology refuses" states nothing).
	valueAfter = regexp.MustCompile("^\\s*(?:value\\s+)?(?:is\\s+|:\\s*|=\\s*|\\(\\s*)?(?:`([^`]+)`|\"([^\"]*)\"|(-?\\d+(?:\\.\\d+)?)\\b|(true|false)\\b|([A-Z][a-z]*[A-Z][A-Za-z]*)(?:\\s*$|\\s*[).,;:|#]))")
	// before it: "`LeastNUMANodes` (fewest zones used; default)" and
	// "AdmitAll (default)", with the parenthesis closed right after the
	// keyword; "AdmitAll is the default".
	valueBeforeParen = regexp.MustCompile("(?:`([^`]+)`|\\b([A-Za-z0-9_.-]+))\\s*\\((?:[^()]*[;,]\\s*)?(?:the\\s+)?$")
	valueBeforeIs    = regexp.MustCompile("(?:`([^`]+)`|\\b([A-Za-z0-9_.-]+))\\s+is\\s+the\\s+$")
	closesParen      = regexp.MustCompile(`^\)`)
)

// backtickSpans returns the [start,end) spans of inline code in s.
func backtickSpans(s string) [][2]int {
	var spans [][2]int
	open := -1
	for i, r := range s {
		if r != '`' {
			continue
		}
		if open < 0 {
			open = i
		} else {
			spans = append(spans, [2]int{open, i + 1})
			open = -1
		}
	}
	return spans
}

func inSpans(spans [][2]int, i int) bool {
	for _, sp := range spans {
		if i >= sp[0] && i < sp[1] {
			return true
		}
	}
	return false
}

// claims finds the stated defaults of a statement and ties each to the
// nearest arg named before it (else after it, else the documented key).
func claims(s statement, args map[string]argDefault, argRe *regexp.Regexp) []claim {
	text := s.text
	spans := backtickSpans(text)
	type mention struct {
		arg        string
		start, end int
	}
	var mentions []mention
	for _, m := range argRe.FindAllStringSubmatchIndex(text, -1) {
		mentions = append(mentions, mention{text[m[2]:m[3]], m[2], m[3]})
	}
	nearest := func(at int) string {
		best := ""
		for _, m := range mentions {
			if m.end <= at {
				best = m.arg
			}
		}
		if best != "" {
			return best
		}
		for _, m := range mentions {
			if m.start >= at {
				return m.arg
			}
		}
		if _, ok := args[s.key]; ok {
			return s.key
		}
		return ""
	}
	var out []claim
	for _, kw := range keyword.FindAllStringIndex(text, -1) {
		if kw[0] < s.claimFrom || inSpans(spans, kw[0]) {
			continue
		}
		rest := text[kw[1]:]
		if m := valueAfter.FindStringSubmatch(rest); m != nil {
			value := m[1] + m[2] + m[3] + m[4] + m[5]
			// "default (`arg: value`)" names its arg.
			if k, v, ok := strings.Cut(value, ":"); ok && m[1] != "" {
				if _, known := args[strings.TrimSpace(k)]; known {
					out = append(out, claim{arg: strings.TrimSpace(k), value: strings.TrimSpace(v), at: kw[0]})
					continue
				}
			}
			out = append(out, claim{arg: nearest(kw[0]), value: value, at: kw[0]})
			continue
		}
		m := valueBeforeIs.FindStringSubmatch(text[:kw[0]])
		if m == nil && closesParen.MatchString(rest) {
			m = valueBeforeParen.FindStringSubmatch(text[:kw[0]])
		}
		if m != nil {
			out = append(out, claim{arg: nearest(kw[0]), value: m[1] + m[2], at: kw[0]})
		}
	}
	return out
}

// argsTable is a markdown table with an arg column and a default column.
type argsTable struct {
	line int
	rows map[string]tableRow // by arg
}

// tableRow is the default an args table states, and where.
type tableRow struct {
	value string
	line  int
}

// argsTables finds the markdown tables whose header has an "arg" and a
// "default" column.
func argsTables(t *testing.T, file, src string) []argsTable {
	t.Helper()
	var out []argsTable
	lines := strings.Split(src, "\n")
	for i := 0; i < len(lines); i++ {
		if !strings.HasPrefix(strings.TrimSpace(lines[i]), "|") {
			continue
		}
		header := splitRow(lines[i])
		argCol, defCol := -1, -1
		for c, h := range header {
			switch strings.ToLower(h) {
			case "arg", "argument":
				argCol = c
			case "default":
				defCol = c
			}
		}
		j := i + 1
		for j < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[j]), "|") {
			j++
		}
		if argCol >= 0 && defCol >= 0 {
			tab := argsTable{line: i + 1, rows: map[string]tableRow{}}
			for k := i + 1; k < j; k++ {
				cells := splitRow(lines[k])
				if strings.HasPrefix(cells[0], "---") {
					continue
				}
				if len(cells) <= max(argCol, defCol) {
					t.Errorf("%s:%d: args table row has %d cells", file, k+1, len(cells))
					continue
				}
				arg := strings.Trim(cells[argCol], "` ")
				value := cells[defCol]
				if m := backticked.FindStringSubmatch(value); m != nil {
					value = m[1]
				}
				tab.rows[arg] = tableRow{strings.Trim(value, `"`), k + 1}
			}
			out = append(out, tab)
		}
		i = j - 1
	}
	return out
}

// TestDocumentedDefaults checks every default the docs state for a plugin arg
// against the code's defaulting: each plugin README's args table (which must
// list exactly the plugin's args, with a default column), other args tables,
// and prose, comments and YAML comments that put an arg, the word "default"
// and a value in one sentence or line. Override examples that state no
// default (values.yaml's pluginArgs examples) are not claims.
func TestDocumentedDefaults(t *testing.T) {
	args := codeDefaults(t)
	names := make([]string, 0, len(args))
	for name := range args {
		names = append(names, regexp.QuoteMeta(name))
	}
	slices.Sort(names)
	argRe := regexp.MustCompile(`\b(` + strings.Join(names, "|") + `)\b`)

	plugins := map[string][]string{}
	for _, a := range args {
		plugins[a.plugin] = append(plugins[a.plugin], a.arg)
	}
	prose := 0 // stated defaults found outside args tables
	for _, file := range defaultDocs(t) {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		src := string(raw)
		var stmts []statement
		if strings.HasSuffix(file, ".md") {
			stmts = markdownStatements(src)
			for _, tab := range argsTables(t, file, src) {
				for arg, row := range tab.rows {
					want, ok := args[arg]
					if !ok {
						continue // checked per plugin README below
					}
					if row.value != want.value {
						t.Errorf("%s:%d: the args table says %s defaults to %q; the code's default is %q", file, row.line, arg, row.value, want.value)
					}
				}
			}
		} else {
			stmts = yamlStatements(src)
		}
		for _, s := range stmts {
			for _, c := range claims(s, args, argRe) {
				if c.arg == "" {
					continue // a default of something else (a Queue's weight, an image tag)
				}
				prose++
				t.Logf("%s:%d: %s default %q", file, s.lineAt(c.at), c.arg, c.value)
				if want := args[c.arg].value; strings.Trim(c.value, `"`) != want {
					t.Errorf("%s:%d: states that %s defaults to %q; the code's default is %q:\n\t%s", file, s.lineAt(c.at), c.arg, c.value, want, strings.TrimSpace(s.text))
				}
			}
		}
	}

	// Every plugin README has one args table listing exactly its args.
	for plugin, pluginArgs := range plugins {
		file := filepath.Join("..", "plugins", strings.ToLower(plugin), "README.md")
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Errorf("plugin %s: %v", plugin, err)
			continue
		}
		tables := argsTables(t, file, string(raw))
		if len(tables) != 1 {
			t.Errorf("%s: want one args table (| arg | default | ... |), found %d", file, len(tables))
			continue
		}
		for _, arg := range pluginArgs {
			if _, ok := tables[0].rows[arg]; !ok {
				t.Errorf("%s:%d: the args table does not list %s (default %q)", file, tables[0].line, arg, args[arg].value)
			}
		}
		for arg, row := range tables[0].rows {
			if a, ok := args[arg]; !ok || a.plugin != plugin {
				t.Errorf("%s:%d: the args table lists %s, which is not an arg of %s", file, row.line, arg, plugin)
			}
		}
	}
	if prose == 0 {
		t.Error("no stated default found outside the args tables; is the scan of the docs broken?")
	}
}

// TestDefaultClaims pins what counts as a stated default.
func TestDefaultClaims(t *testing.T) {
	args := map[string]argDefault{
		"nodesWithoutTopology":    {plugin: "NUMATopology", arg: "nodesWithoutTopology", value: "AdmitAll"},
		"scoringStrategy":         {plugin: "NUMATopology", arg: "scoringStrategy", value: "LeastNUMANodes"},
		"topologyName":            {plugin: "NetworkTopology", arg: "topologyName", value: "default"},
		"reservationAfterSeconds": {plugin: "Coscheduling", arg: "reservationAfterSeconds", value: "30"},
		"defaultQueue":            {plugin: "CapacityQueue", arg: "defaultQueue", value: "default"},
	}
	argRe := regexp.MustCompile(`\b(nodesWithoutTopology|scoringStrategy|topologyName|reservationAfterSeconds|defaultQueue)\b`)
	for _, tc := range []struct {
		text string
		code bool // a YAML line: claims only in its comment
		key  string
		want []string // arg=value
	}{
		{text: "`reservationAfterSeconds` (default 30), first in its queue's order", want: []string{"reservationAfterSeconds=30"}},
		{text: "the one named by `topologyName`, default `default`).", want: []string{"topologyName=default"}},
		{text: "`scoringStrategy`: `LeastNUMANodes` (fewest zones used; default),", want: []string{"scoringStrategy=LeastNUMANodes"}},
		{text: "So by default (`nodesWithoutTopology: RejectAlignedPods`) such a node", want: []string{"nodesWithoutTopology=RejectAlignedPods"}},
		{text: "as the kubelet's default policy `none` does (`nodesWithoutTopology`, default `AdmitAll`).", want: []string{"nodesWithoutTopology=AdmitAll"}},
		{text: "  nodesWithoutTopology: RejectAlignedPods   # the strict opt-in; AdmitAll is the default", code: true, want: []string{"nodesWithoutTopology=AdmitAll"}},
		{text: "#   NUMATopology: {nodesWithoutTopology: RejectAlignedPods}  # default: AdmitAll", code: true, want: []string{"nodesWithoutTopology=AdmitAll"}},
		{text: "  nodesWithoutTopology: AdmitAll   # AdmitAll (default) | RejectAlignedPods (strict)", code: true, want: []string{"nodesWithoutTopology=AdmitAll"}},
		{text: "Default: RejectAlignedPods.", key: "nodesWithoutTopology", want: []string{"nodesWithoutTopology=RejectAlignedPods"}},
		// Not claims: an override example, a default of something else, the
		// word as a value or inside code.
		{text: "#   NUMATopology: {nodesWithoutTopology: RejectAlignedPods}", code: true},
		{text: "  defaultQueue: default   # queue of pods that name none", code: true},
		{text: "else the default queue (`defaultQueue`, created at start if missing)."},
		{text: "the `default` NetworkTopology is read (`topologyName`)."},
		{text: "weight: 2 # default 1", code: true, want: []string{"=1"}},
		{text: "by default NUMATopology refuses pods (`nodesWithoutTopology: AdmitAll` turns that off)"},
		{text: "`nodesWithoutTopology` (default: AdmitAll)", want: []string{"nodesWithoutTopology=AdmitAll"}},
	} {
		s := statement{text: tc.text, key: tc.key}
		if tc.code {
			s.claimFrom = commentStart(tc.text)
		}
		var got []string
		for _, c := range claims(s, args, argRe) {
			got = append(got, c.arg+"="+c.value)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%q: claims %q, want %q", tc.text, got, tc.want)
		}
	}
}

// TestYAMLCommentClaims runs values.yaml-style comments through the same
// path as TestDocumentedDefaults: an override example passes, a comment that
// claims a default is read, wherever on the line or above the key it is.
func TestYAMLCommentClaims(t *testing.T) {
	args := map[string]argDefault{
		"nodesWithoutTopology":          {plugin: "NUMATopology", arg: "nodesWithoutTopology", value: "AdmitAll"},
		"defaultScheduleTimeoutSeconds": {plugin: "Coscheduling", arg: "defaultScheduleTimeoutSeconds", value: "60"},
	}
	argRe := regexp.MustCompile(`\b(nodesWithoutTopology|defaultScheduleTimeoutSeconds)\b`)
	const src = `scheduler:
  # Merged over the args of manifests/scheduler-config.yaml, per plugin. E.g.:
  #   Coscheduling: {defaultScheduleTimeoutSeconds: 120}
  #   # strict: refuse NUMA-aligned pods on nodes without NodeResourceTopology
  #   NUMATopology: {nodesWithoutTopology: RejectAlignedPods}  # default: AdmitAll
  pluginArgs: {}
  # Default: 60. How long members wait in Permit.
  defaultScheduleTimeoutSeconds: 120
  nodesWithoutTopology: RejectAlignedPods   # default RejectAlignedPods
`
	var got []string
	for _, s := range yamlStatements(src) {
		for _, c := range claims(s, args, argRe) {
			got = append(got, fmt.Sprintf("%d:%s=%s", s.lineAt(c.at), c.arg, c.value))
		}
	}
	want := []string{
		"5:nodesWithoutTopology=AdmitAll",
		"7:defaultScheduleTimeoutSeconds=60",
		"9:nodesWithoutTopology=RejectAlignedPods",
	}
	if !slices.Equal(got, want) {
		t.Errorf("claims %q, want %q", got, want)
	}
}
