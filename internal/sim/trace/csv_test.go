package trace

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestRecords: the header must start with the wanted columns, comments and
// leading spaces are skipped, and a row may have neither fewer fields than
// required nor more than the header.
func TestRecords(t *testing.T) {
	want := []string{"a", "b", "c"}
	for _, tc := range []struct {
		name, in string
		head     []string
		rows     int
		err      string
	}{
		{"header and rows", "a,b,c\n1,2,3\n4,5,6\n", want, 2, ""},
		{"extra columns", "a,b,c,d\n1,2,3,4\n1,2,3\n", []string{"a", "b", "c", "d"}, 2, ""},
		{"comments and spaces", "# made by hand\na, b, c\n# skip\n1, 2, 3\n", []string{"a", "b", "c"}, 1, ""},
		{"empty", "", nil, 0, "empty file: a header line is required"},
		{"only comments", "# nothing\n", nil, 0, "empty file"},
		{"wrong column", "a,x,c\n", nil, 0, `header: column 2 must be "b" (want a,b,c)`},
		{"short header", "a,b\n", nil, 0, `column 3 must be "c"`},
		{"short row", "a,b,c\n1,2,3\n1,2\n", nil, 0, "line 3: 2 fields, want at least 3"},
		{"long row", "a,b,c\n1,2,3,4\n", nil, 0, "line 2: 4 fields, the header has 3"},
		{"bad quoting", "a,b,c\n\"1,2,3\n", nil, 0, "quote"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			head, rows, err := records(strings.NewReader(tc.in), want, len(want))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want it to contain %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(head, tc.head) || len(rows) != tc.rows {
				t.Errorf("header %q and %d rows, want %q and %d", head, len(rows), tc.head, tc.rows)
			}
		})
	}
}

func TestParseNumbers(t *testing.T) {
	for _, tc := range []struct {
		in  string
		i   int64
		iOK bool
		f   float64
		fOK bool
	}{
		{"12", 12, true, 12, true},
		{" 7 ", 7, true, 7, true},
		{"0", 0, true, 0, true},
		{"2.5", 0, false, 2.5, true},
		{"-1", 0, false, 0, false},
		{"NaN", 0, false, 0, false},
		{"Inf", 0, false, 0, false},
		{"", 0, false, 0, false},
		{"1e3", 0, false, 1000, true},
	} {
		i, errs := parseInt(tc.in, "n", nil)
		if (len(errs) == 0) != tc.iOK || i != tc.i {
			t.Errorf("parseInt(%q) = %d %v", tc.in, i, errs)
		}
		if !tc.iOK && (len(errs) != 1 || !strings.Contains(errs[0].Error(), `n: "`+tc.in+`" is not a whole number`)) {
			t.Errorf("parseInt(%q): errors %v do not name the field and value", tc.in, errs)
		}
		f, errs := parseFloat(tc.in, "x", nil)
		if (len(errs) == 0) != tc.fOK || f != tc.f {
			t.Errorf("parseFloat(%q) = %v %v", tc.in, f, errs)
		}
	}
	// Errors add up, so a line reports every bad field.
	_, errs := parseInt("a", "first", nil)
	_, errs = parseFloat("b", "second", errs)
	if len(errs) != 2 {
		t.Errorf("errors %v, want both fields", errs)
	}
}

// TestValidate covers the checks the CSV tests do not reach.
func TestValidate(t *testing.T) {
	base := func() *Trace {
		return &Trace{
			Levels: []string{"spine", "leaf"},
			Nodes:  []TraceNode{{Name: "n0", GPUs: 4, Domains: []string{"s0", "l0"}}, {Name: "n1", GPUs: 4, Domains: []string{"s0", "l1"}}},
			Queues: []TraceQueue{{Name: "a", Weight: 1}},
			Jobs:   []TraceJob{{Name: "j", Pods: 2, MinMember: 2, Topology: "leaf", Queue: "a"}},
		}
	}
	for _, tc := range []struct {
		name string
		edit func(tr *Trace)
		want string // "" passes
	}{
		{"valid", func(*Trace) {}, ""},
		{"host topology", func(tr *Trace) { tr.Jobs[0].Topology = "host" }, ""},
		{"no queue CSV, any queue", func(tr *Trace) { tr.Queues, tr.Jobs[0].Queue = nil, "z" }, ""},
		{"no nodes", func(tr *Trace) { tr.Nodes = nil }, "trace: no nodes"},
		{"duplicate level", func(tr *Trace) { tr.Levels[1] = "spine" }, `network level "spine": names must be distinct`},
		{"empty level", func(tr *Trace) { tr.Levels[0] = "" }, `network level ""`},
		{"duplicate node", func(tr *Trace) { tr.Nodes[1].Name = "n0" }, `node "n0": names must be distinct`},
		{"unnamed node", func(tr *Trace) { tr.Nodes[0].Name = "" }, `node ""`},
		{"duplicate queue", func(tr *Trace) { tr.Queues = append(tr.Queues, TraceQueue{Name: "a"}) }, `queue "a": names must be distinct`},
		{"no pods", func(tr *Trace) { tr.Jobs[0].Pods, tr.Jobs[0].MinMember = 0, 0 }, "job j: pods must be > 0"},
		{"unnamed job", func(tr *Trace) { tr.Jobs[0].Name = "" }, `job "": names must be distinct`},
		{"unknown topology lists the levels", func(tr *Trace) { tr.Jobs[0].Topology = "rack" }, "(spine, leaf, host)"},
	} {
		tr := base()
		tc.edit(tr)
		err := tr.Validate()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestLevelIndex(t *testing.T) {
	tr := &Trace{Levels: []string{"spine", "leaf"}}
	for level, want := range map[string]int{"spine": 0, "leaf": 1, "host": 2, "": -1, "rack": -1} {
		if got := tr.levelIndex(level); got != want {
			t.Errorf("levelIndex(%q) = %d, want %d", level, got, want)
		}
	}
}

// TestWriteFilesRoundTrip: a trace written and read back is the same trace;
// the sub-group columns are written only when a job has sub-groups.
func TestWriteFilesRoundTrip(t *testing.T) {
	tr := &Trace{
		Levels: []string{"spine", "nvlink-clique"},
		Nodes: []TraceNode{
			{Name: "n0", CPUMilli: 8000, MemoryMiB: 32768, GPUs: 4, Domains: []string{"s0", "c0"}},
			{Name: "n1", CPUMilli: 8000, MemoryMiB: 32768, GPUs: 4, Domains: []string{"s0", ""}},
		},
		Queues: []TraceQueue{{Name: "a", Weight: 3}},
		Jobs: []TraceJob{
			{Name: "plain", Arrival: 0.25, Duration: 10, Pods: 1, CPUMilli: 500, MemoryMiB: 64, Queue: "a"},
			{Name: "gang", Arrival: 3, Duration: 1.5, Pods: 4, CPUMilli: 100, GPUs: 1, MemoryMiB: 1, MinMember: 4, Topology: "spine"},
		},
	}
	header := func(dir string) string {
		raw, err := os.ReadFile(filepath.Join(dir, "jobs.csv"))
		if err != nil {
			t.Fatal(err)
		}
		return strings.SplitN(string(raw), "\n", 2)[0]
	}
	for _, sub := range []bool{false, true} {
		if sub {
			tr.Jobs[1].SubGroupSize, tr.Jobs[1].SubGroupTopology = 2, "nvlink-clique"
		}
		dir := t.TempDir()
		if err := tr.WriteFiles(dir); err != nil {
			t.Fatal(err)
		}
		if got, want := strings.Count(header(dir), ",")+1, map[bool]int{false: jobColumnsWritten, true: len(jobColumns)}[sub]; got != want {
			t.Errorf("sub-groups %v: %d job columns, want %d", sub, got, want)
		}
		back, err := ReadTraceFiles(filepath.Join(dir, "nodes.csv"), filepath.Join(dir, "jobs.csv"), filepath.Join(dir, "queues.csv"))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(back, tr) {
			t.Errorf("sub-groups %v: read back\n%+v\nwant\n%+v", sub, back, tr)
		}
	}
}

func TestReadTraceFilesMissing(t *testing.T) {
	dir := t.TempDir()
	nodes := writeFile(t, dir, "nodes.csv", "name,cpu_milli,memory_mib,gpus\nn0,1,1,1\n")
	jobs := writeFile(t, dir, "jobs.csv", "name,arrival_s,duration_s,pods,cpu_milli,gpus,memory_mib\n")
	for _, paths := range [][3]string{
		{filepath.Join(dir, "none.csv"), jobs, ""},
		{nodes, filepath.Join(dir, "none.csv"), ""},
		{nodes, jobs, filepath.Join(dir, "none.csv")},
	} {
		if _, err := ReadTraceFiles(paths[0], paths[1], paths[2]); err == nil || !strings.Contains(err.Error(), "none.csv") {
			t.Errorf("%v: error %v, want it to name the missing file", paths, err)
		}
	}
	// A bad row names its file and line.
	bad := writeFile(t, dir, "bad.csv", "name,cpu_milli,memory_mib,gpus\nn0,1,x,1\n")
	if _, err := ReadTraceFiles(bad, jobs, ""); err == nil || !strings.Contains(err.Error(), "bad.csv: line 2: memory_mib") {
		t.Errorf("bad row: %v", err)
	}
}
