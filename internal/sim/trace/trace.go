// Package trace reads, writes and generates cluster traces (a node CSV, a
// job CSV and, optionally, a queue CSV) and turns a trace into a scenario
// the simulator replays time-compressed.
package trace

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/sim/scenario"
)

// A Trace is a cluster's history as two (or three) CSV files: its nodes, the
// jobs submitted to it and, optionally, its queues. `phalanx-sim trace`
// replays it time-compressed as a Scenario (docs/simulator.md documents the
// format).
type Trace struct {
	// Levels are the network levels, widest first: the node CSV's columns
	// after gpus. A node's value in a level's column is its domain there.
	Levels []string
	Nodes  []TraceNode
	Jobs   []TraceJob
	Queues []TraceQueue
}

// TraceNode is one row of the node CSV.
type TraceNode struct {
	Name      string
	CPUMilli  int64
	MemoryMiB int64
	GPUs      int64
	// Domains holds the node's domain in each of Trace.Levels.
	Domains []string
}

// TraceJob is one row of the job CSV.
type TraceJob struct {
	Name string
	// Arrival and Duration are in trace seconds: submission time from the
	// start of the trace, and how long each pod runs once started.
	Arrival, Duration float64
	Pods              int
	CPUMilli          int64
	GPUs              int64
	MemoryMiB         int64
	// MinMember > 0 makes the job a gang of that many members.
	MinMember int
	Queue     string
	// Topology is the network level the gang must stay inside ("" none).
	Topology string
	// SubGroupSize > 0 makes the gang a gang of sub-groups of this many
	// members (ranks i…i+SubGroupSize−1), each inside one domain of
	// SubGroupTopology, e.g. tensor-parallel groups in one NVLink clique.
	SubGroupSize     int
	SubGroupTopology string
}

// TraceQueue is one row of the queue CSV.
type TraceQueue struct {
	Name   string
	Weight int32
}

// Column names of the CSV files, in order.
var (
	nodeColumns = []string{"name", "cpu_milli", "memory_mib", "gpus"}
	jobColumns  = []string{"name", "arrival_s", "duration_s", "pods", "cpu_milli", "gpus", "memory_mib", "min_member", "queue", "topology", "subgroup_size", "subgroup_topology"}
	// jobColumnsWritten is how many of jobColumns WriteFiles writes when no
	// job has sub-groups (the format before them).
	jobColumnsWritten = 10
	jobRequired       = 7
	queueColumns      = []string{"name", "weight"}
)

// NetworkLabelPrefix prefixes a trace level's name to make its node label.
const NetworkLabelPrefix = "network.phalanx.dev/"

// ReadTraceFiles reads a node CSV, a job CSV and, if queues is not "", a
// queue CSV.
func ReadTraceFiles(nodes, jobs, queues string) (*Trace, error) {
	t := &Trace{}
	if err := readCSVFile(nodes, t.readNodes); err != nil {
		return nil, err
	}
	if err := readCSVFile(jobs, t.readJobs); err != nil {
		return nil, err
	}
	if queues != "" {
		if err := readCSVFile(queues, t.readQueues); err != nil {
			return nil, err
		}
	}
	return t, t.Validate()
}

func readCSVFile(path string, read func(io.Reader) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := read(f); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// records reads a CSV with a header; '#' starts a comment line. It checks
// that the header starts with want and returns the header and the rows.
func records(r io.Reader, want []string, required int) ([]string, [][]string, error) {
	cr := csv.NewReader(r)
	cr.Comment = '#'
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	rows, err := cr.ReadAll()
	if err != nil {
		return nil, nil, err
	}
	if len(rows) == 0 {
		return nil, nil, errors.New("empty file: a header line is required")
	}
	head := rows[0]
	for i := 0; i < required; i++ {
		if i >= len(head) || strings.TrimSpace(head[i]) != want[i] {
			return nil, nil, fmt.Errorf("header: column %d must be %q (want %s)", i+1, want[i], strings.Join(want, ","))
		}
	}
	for i, row := range rows[1:] {
		if len(row) < required {
			return nil, nil, fmt.Errorf("line %d: %d fields, want at least %d", i+2, len(row), required)
		}
		if len(row) > len(head) {
			return nil, nil, fmt.Errorf("line %d: %d fields, the header has %d", i+2, len(row), len(head))
		}
	}
	return head, rows[1:], nil
}

func (t *Trace) readNodes(r io.Reader) error {
	head, rows, err := records(r, nodeColumns, len(nodeColumns))
	if err != nil {
		return err
	}
	for _, l := range head[len(nodeColumns):] {
		t.Levels = append(t.Levels, strings.TrimSpace(l))
	}
	for i, row := range rows {
		n := TraceNode{Name: row[0]}
		var errs []error
		n.CPUMilli, errs = parseInt(row[1], "cpu_milli", errs)
		n.MemoryMiB, errs = parseInt(row[2], "memory_mib", errs)
		n.GPUs, errs = parseInt(row[3], "gpus", errs)
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("line %d: %w", i+2, err)
		}
		for j := range t.Levels {
			v := ""
			if len(nodeColumns)+j < len(row) {
				v = strings.TrimSpace(row[len(nodeColumns)+j])
			}
			n.Domains = append(n.Domains, v)
		}
		t.Nodes = append(t.Nodes, n)
	}
	return nil
}

func (t *Trace) readJobs(r io.Reader) error {
	head, rows, err := records(r, jobColumns, jobRequired)
	if err != nil {
		return err
	}
	// The sub-group columns, when there, under their names: an older file
	// with columns of its own after topology is not read as sub-groups.
	for i := jobColumnsWritten; i < len(head) && i < len(jobColumns); i++ {
		if strings.TrimSpace(head[i]) != jobColumns[i] {
			return fmt.Errorf("header: column %d must be %q (want %s)", i+1, jobColumns[i], strings.Join(jobColumns, ","))
		}
	}
	for i, row := range rows {
		j := TraceJob{Name: row[0]}
		var errs []error
		j.Arrival, errs = parseFloat(row[1], "arrival_s", errs)
		j.Duration, errs = parseFloat(row[2], "duration_s", errs)
		var pods, minMember int64
		pods, errs = parseInt(row[3], "pods", errs)
		j.CPUMilli, errs = parseInt(row[4], "cpu_milli", errs)
		j.GPUs, errs = parseInt(row[5], "gpus", errs)
		j.MemoryMiB, errs = parseInt(row[6], "memory_mib", errs)
		if len(row) > 7 && strings.TrimSpace(row[7]) != "" {
			minMember, errs = parseInt(row[7], "min_member", errs)
		}
		if len(row) > 8 {
			j.Queue = strings.TrimSpace(row[8])
		}
		if len(row) > 9 {
			j.Topology = strings.TrimSpace(row[9])
		}
		var size int64
		if len(row) > 10 && strings.TrimSpace(row[10]) != "" {
			size, errs = parseInt(row[10], "subgroup_size", errs)
		}
		if len(row) > 11 {
			j.SubGroupTopology = strings.TrimSpace(row[11])
		}
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("line %d: %w", i+2, err)
		}
		j.Pods, j.MinMember, j.SubGroupSize = int(pods), int(minMember), int(size)
		t.Jobs = append(t.Jobs, j)
	}
	return nil
}

func (t *Trace) readQueues(r io.Reader) error {
	_, rows, err := records(r, queueColumns, len(queueColumns))
	if err != nil {
		return err
	}
	for i, row := range rows {
		w, errs := parseInt(row[1], "weight", nil)
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("line %d: %w", i+2, err)
		}
		t.Queues = append(t.Queues, TraceQueue{Name: strings.TrimSpace(row[0]), Weight: int32(w)})
	}
	return nil
}

func parseInt(s, field string, errs []error) (int64, []error) {
	v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || v < 0 {
		return 0, append(errs, fmt.Errorf("%s: %q is not a whole number ≥ 0", field, s))
	}
	return v, errs
}

func parseFloat(s, field string, errs []error) (float64, []error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, append(errs, fmt.Errorf("%s: %q is not a number ≥ 0", field, s))
	}
	return v, errs
}

// Validate checks names, sizes and references.
func (t *Trace) Validate() error {
	if len(t.Nodes) == 0 {
		return errors.New("trace: no nodes")
	}
	levels := map[string]bool{}
	for _, l := range t.Levels {
		if l == "" || l == scenario.HostLevel || levels[l] {
			return fmt.Errorf("trace: network level %q: names must be distinct, non-empty and not %q (always there)", l, scenario.HostLevel)
		}
		levels[l] = true
	}
	names := map[string]bool{}
	for _, n := range t.Nodes {
		if n.Name == "" || names[n.Name] {
			return fmt.Errorf("trace: node %q: names must be distinct and non-empty", n.Name)
		}
		names[n.Name] = true
	}
	queues := map[string]bool{}
	for _, q := range t.Queues {
		if q.Name == "" || queues[q.Name] {
			return fmt.Errorf("trace: queue %q: names must be distinct and non-empty", q.Name)
		}
		queues[q.Name] = true
	}
	jobs := map[string]bool{}
	for _, j := range t.Jobs {
		switch {
		case j.Name == "" || jobs[j.Name]:
			return fmt.Errorf("trace: job %q: names must be distinct and non-empty", j.Name)
		case j.Pods <= 0:
			return fmt.Errorf("trace: job %s: pods must be > 0", j.Name)
		case j.MinMember > j.Pods:
			return fmt.Errorf("trace: job %s: min_member %d > pods %d", j.Name, j.MinMember, j.Pods)
		case j.Topology != "" && j.Topology != scenario.HostLevel && !levels[j.Topology]:
			return fmt.Errorf("trace: job %s: topology %q is not a column of the node CSV (%s)", j.Name, j.Topology, strings.Join(append(append([]string(nil), t.Levels...), scenario.HostLevel), ", "))
		case j.Topology != "" && j.MinMember == 0:
			return fmt.Errorf("trace: job %s: a topology requirement needs a gang (min_member > 0)", j.Name)
		case len(t.Queues) > 0 && j.Queue != "" && !queues[j.Queue]:
			return fmt.Errorf("trace: job %s: queue %q is not in the queue CSV", j.Name, j.Queue)
		}
		if err := t.validateSubGroups(j); err != nil {
			return err
		}
		jobs[j.Name] = true
	}
	return nil
}

// levelIndex is the position of a level in Levels, widest first; host is
// after all of them; -1 for "" or an unknown level.
func (t *Trace) levelIndex(level string) int {
	if level == scenario.HostLevel {
		return len(t.Levels)
	}
	for i, l := range t.Levels {
		if l == level {
			return i
		}
	}
	return -1
}

// validateSubGroups checks a job's sub-group columns: a size that divides
// min_member, with a level that is a network level narrower than the
// gang's own (when the gang has one).
func (t *Trace) validateSubGroups(j TraceJob) error {
	switch {
	case j.SubGroupSize == 0 && j.SubGroupTopology == "":
		return nil
	case j.SubGroupSize == 0:
		return fmt.Errorf("trace: job %s: subgroup_topology %q needs a subgroup_size", j.Name, j.SubGroupTopology)
	case j.MinMember == 0:
		return fmt.Errorf("trace: job %s: sub-groups need a gang (min_member > 0)", j.Name)
	case j.MinMember%j.SubGroupSize != 0:
		return fmt.Errorf("trace: job %s: subgroup_size %d does not divide min_member %d", j.Name, j.SubGroupSize, j.MinMember)
	case j.SubGroupTopology == "":
		return fmt.Errorf("trace: job %s: subgroup_size needs a subgroup_topology (the level each sub-group stays inside)", j.Name)
	case t.levelIndex(j.SubGroupTopology) < 0:
		return fmt.Errorf("trace: job %s: subgroup_topology %q is not a column of the node CSV (%s)", j.Name, j.SubGroupTopology, strings.Join(append(append([]string(nil), t.Levels...), scenario.HostLevel), ", "))
	case j.Topology != "" && t.levelIndex(j.SubGroupTopology) <= t.levelIndex(j.Topology):
		return fmt.Errorf("trace: job %s: subgroup_topology %q is not inside the gang's topology %q", j.Name, j.SubGroupTopology, j.Topology)
	}
	return nil
}

// Horizon is the last moment of the trace: the latest arrival plus duration.
func (t *Trace) Horizon() float64 {
	var h float64
	for _, j := range t.Jobs {
		h = math.Max(h, j.Arrival+j.Duration)
	}
	return h
}

// GPUs is the cluster's GPU count.
func (t *Trace) GPUs() int64 {
	var g int64
	for _, n := range t.Nodes {
		g += n.GPUs
	}
	return g
}

// OfferedLoad is the jobs' GPU-seconds over the cluster's GPU-seconds from
// time 0 to the last arrival.
func (t *Trace) OfferedLoad() float64 {
	var work, last float64
	for _, j := range t.Jobs {
		work += float64(j.GPUs) * float64(j.Pods) * j.Duration
		last = math.Max(last, j.Arrival)
	}
	if last == 0 || t.GPUs() == 0 {
		return 0
	}
	return work / (float64(t.GPUs()) * last)
}

// Scenario turns the trace into a simulator scenario whose times are the
// trace's divided by speed. timeout bounds the run (0: the compressed
// horizon, twice, plus a minute).
func (t *Trace) Scenario(name string, speed float64, timeout time.Duration) (*scenario.Scenario, error) {
	if speed <= 0 {
		return nil, fmt.Errorf("speed must be > 0")
	}
	compress := func(s float64) scenario.Duration {
		d := time.Duration(s / speed * float64(time.Second))
		if s > 0 && d < time.Millisecond {
			d = time.Millisecond
		}
		return scenario.Duration{Duration: d}
	}
	sc := &scenario.Scenario{
		Name:        name,
		Description: fmt.Sprintf("trace replay: %d nodes, %d GPUs, %d jobs, %.0f trace seconds at %gx", len(t.Nodes), t.GPUs(), len(t.Jobs), t.Horizon(), speed),
	}
	for _, l := range t.Levels {
		sc.Network = append(sc.Network, phalanxv1alpha1.TopologyLevel{Name: l, NodeLabel: NetworkLabelPrefix + l})
	}
	for _, n := range t.Nodes {
		g := scenario.NodeGroup{Prefix: n.Name, Count: 1, CPU: fmt.Sprintf("%dm", n.CPUMilli), Memory: fmt.Sprintf("%dMi", n.MemoryMiB), GPUs: n.GPUs, ExactName: true}
		for i, l := range t.Levels {
			if n.Domains[i] != "" {
				if g.Labels == nil {
					g.Labels = map[string]string{}
				}
				g.Labels[NetworkLabelPrefix+l] = n.Domains[i]
			}
		}
		sc.Nodes = append(sc.Nodes, g)
	}
	queues := map[string]bool{}
	for _, q := range t.Queues {
		sc.Queues = append(sc.Queues, scenario.Queue{Name: q.Name, QueueSpec: phalanxv1alpha1.QueueSpec{Weight: q.Weight}})
		queues[q.Name] = true
	}
	var implicit []string
	for _, j := range t.Jobs {
		if j.Queue != "" && !queues[j.Queue] {
			queues[j.Queue] = true
			implicit = append(implicit, j.Queue)
		}
	}
	sort.Strings(implicit)
	for _, q := range implicit {
		sc.Queues = append(sc.Queues, scenario.Queue{Name: q, QueueSpec: phalanxv1alpha1.QueueSpec{Weight: 1}})
	}
	for _, j := range t.Jobs {
		job := scenario.Job{
			Name: j.Name, Replicas: j.Pods, MinMember: int32(j.MinMember),
			CPU: fmt.Sprintf("%dm", j.CPUMilli), Memory: fmt.Sprintf("%dMi", j.MemoryMiB), GPUs: j.GPUs,
			Arrival: compress(j.Arrival), Duration: compress(j.Duration), Queue: j.Queue,
		}
		if j.Topology != "" {
			job.Annotations = map[string]string{phalanxv1alpha1.TopologyRequiredAnnotation: j.Topology}
		}
		if j.SubGroupSize > 0 {
			// phalanx's sub-group annotations on the PodGroup, and each
			// pod's rank as the rank label (as a job controller sets it).
			if job.Annotations == nil {
				job.Annotations = map[string]string{}
			}
			job.Annotations[phalanxv1alpha1.SubGroupSizeAnnotation] = strconv.Itoa(j.SubGroupSize)
			job.Annotations[phalanxv1alpha1.SubGroupTopologyRequiredAnnotation] = j.SubGroupTopology
			job.Ranks = true
		}
		sc.Jobs = append(sc.Jobs, job)
	}
	sc.Timeout.Duration = timeout
	if timeout == 0 {
		sc.Timeout.Duration = 2*compress(t.Horizon()).Duration + time.Minute
	}
	if err := sc.Validate(); err != nil {
		return nil, err
	}
	return sc, nil
}

// WriteFiles writes the trace as nodes.csv, jobs.csv and queues.csv in dir.
func (t *Trace) WriteFiles(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	nodes := [][]string{append(append([]string(nil), nodeColumns...), t.Levels...)}
	for _, n := range t.Nodes {
		nodes = append(nodes, append([]string{n.Name, itoa(n.CPUMilli), itoa(n.MemoryMiB), itoa(n.GPUs)}, n.Domains...))
	}
	// The sub-group columns only when a job has sub-groups: other traces
	// keep the format they had.
	columns := jobColumnsWritten
	for _, j := range t.Jobs {
		if j.SubGroupSize > 0 {
			columns = len(jobColumns)
		}
	}
	jobs := [][]string{jobColumns[:columns]}
	for _, j := range t.Jobs {
		mm := ""
		if j.MinMember > 0 {
			mm = strconv.Itoa(j.MinMember)
		}
		row := []string{j.Name, ftoa(j.Arrival), ftoa(j.Duration), strconv.Itoa(j.Pods), itoa(j.CPUMilli), itoa(j.GPUs), itoa(j.MemoryMiB), mm, j.Queue, j.Topology}
		if columns > jobColumnsWritten {
			size := ""
			if j.SubGroupSize > 0 {
				size = strconv.Itoa(j.SubGroupSize)
			}
			row = append(row, size, j.SubGroupTopology)
		}
		jobs = append(jobs, row)
	}
	queues := [][]string{queueColumns}
	for _, q := range t.Queues {
		queues = append(queues, []string{q.Name, strconv.Itoa(int(q.Weight))})
	}
	for name, rows := range map[string][][]string{"nodes.csv": nodes, "jobs.csv": jobs, "queues.csv": queues} {
		if err := writeCSV(filepath.Join(dir, name), rows); err != nil {
			return err
		}
	}
	return nil
}

func writeCSV(path string, rows [][]string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	if err := w.WriteAll(rows); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func itoa(v int64) string   { return strconv.FormatInt(v, 10) }
func ftoa(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
