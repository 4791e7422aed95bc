package sim

import (
	"fmt"
	"html"
	"html/template"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// WriteHTML writes one self-contained page (inline CSS and SVG, no scripts,
// nothing fetched) reporting every result: its verdict, jobs, timeline,
// utilization, queue shares and where each job ran.
func WriteHTML(w io.Writer, results []*Result) error {
	page := htmlPage{
		Generated: time.Now().Format("2006-01-02 15:04:05 MST"),
		TimelineLegend: []legendItem{
			{Color: waitColor, Label: "waiting"},
			{Color: color(0), Label: "running (in the job's colour)"},
			{Color: neverColor, Label: "never started", Class: "hatch"},
		},
	}
	for i, r := range results {
		page.Scenarios = append(page.Scenarios, r.htmlScenario(fmt.Sprintf("s%d", i)))
	}
	return pageTemplate.Execute(w, page)
}

type htmlPage struct {
	Generated      string
	TimelineLegend []legendItem
	Scenarios      []htmlScenario
}

type htmlScenario struct {
	ID, Name    string
	Paragraphs  []string
	Summary     string
	Errors      []string
	Jobs        []htmlJob
	NotStarted  []htmlJob
	Timeline    template.HTML
	Utilization template.HTML
	UtilLegend  []legendItem
	UtilStats   []string
	Shares      template.HTML
	ShareLegend []legendItem
	ShareRows   []htmlShare
	ShareUnit   string
	Topology    template.HTML
	JobLegend   []legendItem
	NUMANodes   int
	NUMAErrors  []string
}

type htmlJob struct {
	jobCells
	Key, Queue, Domain, Nodes, Reason, Color string
	Pods                                     int
	Ran                                      bool
}

// htmlShare is a row of the queue shares table; Verdict is "pass", "fail"
// or "" without an expected share.
type htmlShare struct{ Name, Weight, Share, Expect, Verdict string }

// legendItem is a swatch and its label; Class picks the swatch's shape
// (solid, line, dash, hatch).
type legendItem struct{ Color, Label, Class string }

// jobCells are a job's columns in the jobs table, as the text report has them.
type jobCells struct{ Min, Started, Whole, Wait, Done string }

func (j *JobResult) cells() jobCells {
	c := jobCells{Min: "-", Started: "no", Whole: "-", Wait: "-"}
	if j.Job.MinMember > 0 {
		c.Min = fmt.Sprint(j.Job.MinMember)
	}
	if j.Ran() {
		c.Started = "yes"
		c.Wait = j.Wait().Round(10 * time.Millisecond).String()
		if j.Job.MinMember > 0 {
			c.Whole = "yes"
			if j.Spread > time.Second {
				c.Whole = fmt.Sprintf("spread %v", j.Spread.Round(10*time.Millisecond))
			}
		}
	} else if j.MaxBound > 0 {
		c.Whole = fmt.Sprintf("PARTIAL %d", j.MaxBound)
	}
	c.Done = fmt.Sprintf("%d/%d", j.Completed, j.Job.Replicas)
	if j.Evicted > 0 {
		c.Done += fmt.Sprintf(" (%d evicted)", j.Evicted)
	}
	return c
}

// why is the reason a job did not run, or a note that none was written.
func (j *JobResult) why() string {
	if j.Reason == "" {
		return "no condition written"
	}
	return j.Reason
}

func (r *Result) htmlScenario(id string) htmlScenario {
	sc := r.Scenario
	s := htmlScenario{
		ID: id, Name: sc.Name, Summary: r.summary(), ShareUnit: r.shareUnit(),
		NUMANodes: len(r.numaNodes()), NUMAErrors: r.NUMAViolations,
	}
	for _, p := range strings.Split(strings.TrimSpace(sc.Description), "\n\n") {
		if p = strings.TrimSpace(p); p != "" {
			s.Paragraphs = append(s.Paragraphs, p)
		}
	}
	for _, err := range r.Check() {
		s.Errors = append(s.Errors, err.Error())
	}
	for i, j := range r.Jobs {
		row := htmlJob{
			jobCells: j.cells(), Key: j.Job.Key(), Queue: orDash(j.Job.Queue), Domain: orDash(r.Domain(j)),
			Nodes: nodeList(j.Nodes), Color: color(i), Pods: j.Job.Replicas, Ran: j.Ran(),
		}
		if !j.Ran() {
			row.Reason = j.why()
			s.NotStarted = append(s.NotStarted, row)
		}
		s.Jobs = append(s.Jobs, row)
		if len(j.Nodes) > 0 {
			s.JobLegend = append(s.JobLegend, legendItem{Color: row.Color, Label: row.Key})
		}
	}
	if len(r.Jobs) > 0 {
		s.Timeline = r.timeline(id)
	}
	s.Utilization, s.UtilLegend, s.UtilStats = r.utilizationChart()
	if len(sc.Queues) > 0 {
		s.Shares, s.ShareLegend = r.sharesChart()
		for _, q := range r.QueueShares() {
			row := htmlShare{Name: q.Name, Weight: fmt.Sprint(q.Weight), Share: "-", Expect: "-"}
			if q.Samples > 0 {
				row.Share = fmt.Sprintf("%.0f%% over %d samples", q.Share*100, q.Samples)
			}
			if q.Expect != nil {
				row.Expect = fmt.Sprintf("%.0f%% ± %.0f%%", *q.Expect*100, sc.ShareTolerance*100)
				row.Verdict = "fail"
				if r.shareOK(q) {
					row.Verdict = "pass"
				}
			}
			s.ShareRows = append(s.ShareRows, row)
		}
	}
	var tainted bool
	s.Topology, tainted = r.topologyMap(id)
	if tainted {
		s.JobLegend = append(s.JobLegend, legendItem{Color: taintedColor, Label: "tainted node (no job may use it)", Class: "hatch"})
	}
	return s
}

// shareOK is Check's verdict on a queue with an expected share.
func (r *Result) shareOK(q QueueShare) bool {
	return q.Samples > 0 && math.Abs(q.Share-*q.Expect) <= r.Scenario.ShareTolerance
}

func (r *Result) summary() string {
	sc := r.Scenario
	tainted := 0
	for _, n := range r.Nodes {
		if n.Tainted {
			tainted++
		}
	}
	nodes := fmt.Sprintf("%d nodes", len(r.Nodes))
	if tainted > 0 {
		nodes += fmt.Sprintf(" (%d tainted, not counted in GPUs and cores)", tainted)
	}
	var levels []string
	for _, l := range sc.levels() {
		levels = append(levels, l.Name)
	}
	queues := "default only"
	if len(sc.Queues) > 0 {
		var names []string
		for _, q := range sc.Queues {
			names = append(names, q.Name)
		}
		queues = strings.Join(names, ", ")
	}
	return strings.Join([]string{
		nodes,
		fmt.Sprintf("%d GPUs", r.GPUs),
		strconv.FormatFloat(float64(r.CPU)/1000, 'f', -1, 64) + " CPU cores",
		fmt.Sprintf("%d jobs", len(r.Jobs)),
		fmt.Sprintf("%.1f s elapsed", r.Elapsed.Seconds()),
		"network levels: " + strings.Join(levels, " › "),
		"queues: " + queues,
	}, " · ")
}

// Colours. A job keeps its palette colour in the table, the timeline and the
// topology map; greys and red are left for waiting, tainted and never started,
// light enough that labels on them stay readable.
var palette = []string{
	"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
	"#393b79", "#aec7e8", "#ffbb78", "#98df8a", "#c5b0d5", "#637939", "#f7b6d2", "#9edae5",
}

const (
	waitColor    = "#c7c7c7"
	neverColor   = "#f4b6b6"
	neverStroke  = "#c62828"
	taintedColor = "#dcdcdc"
	gpuColor     = "#1f77b4"
	cpuColor     = "#ff7f0e"
)

func color(i int) string { return palette[i%len(palette)] }

// svg accumulates the elements of one inline SVG image.
type svg struct {
	b    strings.Builder
	w, h float64
}

func (s *svg) add(format string, a ...any) {
	fmt.Fprintf(&s.b, format, a...)
	s.b.WriteByte('\n')
}

// text writes an escaped label; attrs are extra attributes, written as is.
func (s *svg) text(x, y float64, attrs, label string) {
	s.add(`<text x="%.1f" y="%.1f" %s>%s</text>`, x, y, attrs, html.EscapeString(label))
}

// hatch defines a pattern of dark diagonal stripes over colour c, like the
// legend's hatched swatches.
func (s *svg) hatch(id, c string) {
	s.add(`<defs><pattern id="%s" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="%s"/><line x1="0" y1="0" x2="0" y2="6" stroke="#000" stroke-width="2" stroke-opacity=".18"/></pattern></defs>`, id, c)
}

func (s *svg) html() template.HTML {
	return template.HTML(fmt.Sprintf(`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %.0f %.0f" width="%.0f" height="%.0f">`+"\n%s</svg>", s.w, s.h, s.w, s.h, s.b.String()))
}

// tooltip is an SVG <title> child: the browser shows it on hover.
func tooltip(format string, a ...any) string {
	return "<title>" + html.EscapeString(fmt.Sprintf(format, a...)) + "</title>"
}

// scale maps data values in [lo, hi] onto pixels [from, to].
type scale struct{ lo, hi, from, to float64 }

func (s scale) px(v float64) float64 {
	if s.hi == s.lo {
		return s.from
	}
	return s.from + (v-s.lo)/(s.hi-s.lo)*(s.to-s.from)
}

// chart is an SVG with a plot area and the scales onto it.
type chart struct {
	svg
	x, y scale
}

const chartWidth = 960

// newChart makes a chart of the given height whose x axis is the run's
// seconds and y axis 0..ymax upwards; left and bottom are the margins for
// the axes' labels.
func newChart(r *Result, height, left, bottom, ymax float64) *chart {
	const top, right = 12, 24
	return &chart{
		svg: svg{w: chartWidth, h: height},
		x:   scale{0, r.seconds(), left, chartWidth - right},
		y:   scale{0, ymax, height - bottom, top},
	}
}

// seconds is the run's length, never 0, so time axes always have a span.
func (r *Result) seconds() float64 {
	if r.Elapsed <= 0 {
		return 1
	}
	return r.Elapsed.Seconds()
}

// xAxis draws vertical grid lines, the time ticks and the axis title.
func (c *chart) xAxis() {
	top, bottom := math.Min(c.y.from, c.y.to), math.Max(c.y.from, c.y.to)
	for _, v := range ticks(c.x.hi, 10) {
		x := c.x.px(v)
		c.add(`<line class="grid" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`, x, top, x, bottom)
		c.text(x, bottom+15, `text-anchor="middle"`, trimFloat(v)+"s")
	}
	c.add(`<line class="axis" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`, c.x.from, bottom, c.x.to, bottom)
	c.text((c.x.from+c.x.to)/2, bottom+32, `class="title" text-anchor="middle"`, "seconds since the run started")
}

// yPercent draws horizontal grid lines at 0..100% of a 0..1 y scale.
func (c *chart) yPercent(title string) {
	for _, v := range ticks(1, 5) {
		y := c.y.px(v)
		c.add(`<line class="grid" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`, c.x.from, y, c.x.to, y)
		c.text(c.x.from-6, y+4, `text-anchor="end"`, fmt.Sprintf("%.0f%%", v*100))
	}
	c.add(`<line class="axis" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`, c.x.from, c.y.from, c.x.from, c.y.to)
	mid := (c.y.from + c.y.to) / 2
	c.text(14, mid, fmt.Sprintf(`class="title" text-anchor="middle" transform="rotate(-90 14 %.1f)"`, mid), title)
}

// ticks returns round values (steps of 1, 2 or 5 × 10ⁿ) from 0 to limit,
// about n of them.
func ticks(limit float64, n int) []float64 {
	if limit <= 0 {
		return []float64{0}
	}
	raw := limit / float64(n)
	step := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{2, 2.5, 2} {
		if step >= raw {
			break
		}
		step *= m
	}
	var out []float64
	for i := 0; float64(i)*step <= limit*(1+1e-9); i++ {
		out = append(out, float64(i)*step)
	}
	return out
}

func trimFloat(v float64) string {
	return strconv.FormatFloat(math.Round(v*1000)/1000, 'f', -1, 64)
}

// clip shortens s to n runes, marking the cut.
func clip(s string, n int) string {
	if rs := []rune(s); len(rs) > n {
		return string(rs[:n-1]) + "…"
	}
	return s
}

// timeline is a Gantt chart: per job, the wait from submission to quorum,
// then the run until the last pod completed (or the run ended).
func (r *Result) timeline(id string) template.HTML {
	rowH, font := 22.0, 11.0
	if len(r.Jobs) > 40 {
		rowH, font = 12, 9
	}
	longest := 0
	for _, j := range r.Jobs {
		longest = max(longest, len([]rune(j.Job.Key())))
	}
	left := math.Min(math.Max(float64(longest)*font*0.6+16, 80), 260)
	height := 12 + rowH*float64(len(r.Jobs)) + 44
	c := newChart(r, height, left, 44, 1)
	c.y = scale{0, float64(len(r.Jobs)), 12, 12 + rowH*float64(len(r.Jobs))} // row i's top, first job at the top
	never := id + "-never"
	c.hatch(never, neverColor)
	for i := range r.Jobs {
		if i%2 == 1 {
			c.add(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#f7f7f7"/>`, c.x.from, c.y.px(float64(i)), c.x.to-c.x.from, rowH)
		}
	}
	c.xAxis()
	barH := rowH * 0.7
	for i, j := range r.Jobs {
		key := j.Job.Key()
		y := c.y.px(float64(i)) + (rowH-barH)/2
		c.add(`<text x="%.1f" y="%.1f" text-anchor="end" style="font-size:%.0fpx">%s%s</text>`,
			left-6, y+barH/2+font/3, font, html.EscapeString(clip(key, int((left-16)/(font*0.6)))), tooltip("%s", key))
		bar := func(from, to time.Duration, fill, attrs, tip string) {
			x0, x1 := c.x.px(from.Seconds()), c.x.px(to.Seconds())
			c.add(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" %s>%s</rect>`, x0, y, math.Max(x1-x0, 1), barH, fill, attrs, tip)
		}
		if !j.Ran() {
			bar(j.Submitted, r.Elapsed, "url(#"+never+")", `stroke="`+neverStroke+`"`,
				tooltip("%s: submitted at %.1fs, never started: %s", key, j.Submitted.Seconds(), j.why()))
			c.text(c.x.px(j.Submitted.Seconds())+4, y+barH/2+font/3, fmt.Sprintf(`style="font-size:%.0fpx;font-weight:600" fill="#8b0000"`, font), "never started")
			continue
		}
		bar(j.Submitted, j.QuorumAt, waitColor, "", tooltip("%s: waited %.1fs (%.1fs → %.1fs)", key, j.Wait().Seconds(), j.Submitted.Seconds(), j.QuorumAt.Seconds()))
		end, state := j.FinishedAt, "finished"
		if end == 0 {
			end, state = r.Elapsed, "still running at the end"
		}
		bar(j.QuorumAt, end, color(i), "", tooltip("%s: running %.1fs → %.1fs, %s", key, j.QuorumAt.Seconds(), end.Seconds(), state))
	}
	return c.html()
}

// utilizationChart plots the GPUs and CPU in use, in percent of the
// untainted nodes' capacity, with their average and peak.
func (r *Result) utilizationChart() (template.HTML, []legendItem, []string) {
	c := newChart(r, 260, 56, 44, 1)
	c.yPercent("% of capacity in use")
	c.xAxis()
	var legend []legendItem
	var stats []string
	series := func(name, col string, capacity int64, used func(Sample) int64) {
		if capacity == 0 {
			return
		}
		frac := func(s Sample) float64 { return float64(used(s)) / float64(capacity) }
		var pts []string
		for _, s := range r.Samples {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", c.x.px(s.At.Seconds()), c.y.px(frac(s))))
		}
		c.add(`<polyline fill="none" stroke="%s" stroke-width="2" points="%s">%s</polyline>`, col, strings.Join(pts, " "), tooltip("%s in use", name))
		avg, peak := r.utilization(frac)
		legend = append(legend, legendItem{Color: col, Label: name, Class: "line"})
		stats = append(stats, fmt.Sprintf("%s: average %.0f%%, peak %.0f%%", name, avg*100, peak*100))
	}
	series("GPU", gpuColor, r.GPUs, func(s Sample) int64 { return s.GPUUsed })
	series("CPU", cpuColor, r.CPU, func(s Sample) int64 { return s.CPUUsed })
	return c.html(), legend, stats
}

// sharesChart stacks, per sample, each scenario queue's share of what all
// queues used; dashed lines mark where the bands' tops should be if every
// queue held its expected share.
func (r *Result) sharesChart() (template.HTML, []legendItem) {
	qs := r.Scenario.Queues
	c := newChart(r, 260, 56, 44, 1)
	c.yPercent("share of " + r.shareUnit() + " in use")
	c.xAxis()
	// tops[k][i] is the top of queue k's band at sample i.
	tops := make([][]float64, len(qs))
	for k := range tops {
		tops[k] = make([]float64, len(r.Samples))
	}
	for i, s := range r.Samples {
		cum := 0.0
		for k, q := range qs {
			share, _ := s.share(q.Name)
			cum += share
			tops[k][i] = cum
		}
	}
	var legend []legendItem
	for k, q := range qs {
		var pts []string
		for i, s := range r.Samples {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", c.x.px(s.At.Seconds()), c.y.px(tops[k][i])))
		}
		for i := len(r.Samples) - 1; i >= 0; i-- {
			bottom := 0.0
			if k > 0 {
				bottom = tops[k-1][i]
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", c.x.px(r.Samples[i].At.Seconds()), c.y.px(bottom)))
		}
		c.add(`<polygon fill="%s" fill-opacity=".8" points="%s">%s</polygon>`, color(k), strings.Join(pts, " "), tooltip("queue %s", q.Name))
		legend = append(legend, legendItem{Color: color(k), Label: "queue " + q.Name})
	}
	// A band's expected top is defined while every queue below it has an
	// expected share too.
	expected := 0.0
	for k, q := range qs {
		if q.ExpectShare == nil {
			break
		}
		expected += *q.ExpectShare
		y := c.y.px(math.Min(expected, 1))
		c.add(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2" stroke-dasharray="6 4">%s</line>`,
			c.x.from, y, c.x.to, y, darker(color(k)), tooltip("expected top of queue %s: %.0f%%", q.Name, expected*100))
		legend = append(legend, legendItem{Color: darker(color(k)), Label: fmt.Sprintf("expected top of %s (%.0f%%)", q.Name, expected*100), Class: "dash"})
	}
	return c.html(), legend
}

// darker halves a #rrggbb colour's brightness, so a dashed line stands out
// on the band of the same colour.
func darker(c string) string {
	v, _ := strconv.ParseUint(c[1:], 16, 32) // palette colours are all #rrggbb
	return fmt.Sprintf("#%06x", (v>>1)&0x7f7f7f)
}

// topoBox is a box of the topology map: the cluster, a network domain, or
// a node cell. x and y are relative to the parent box.
type topoBox struct {
	label      string
	node       *NodeResult
	children   []*topoBox
	x, y, w, h float64
}

func (b *topoBox) child(label string) *topoBox {
	for _, c := range b.children {
		if c.label == label {
			return c
		}
	}
	c := &topoBox{label: label}
	b.children = append(b.children, c)
	return c
}

// cellStyle sizes the map: labelled node cells, or tiny unlabelled ones for
// clusters too big to label.
type cellStyle struct {
	w, h, gap, pad, header float64
	labels                 bool
}

var (
	labelledCells = cellStyle{w: 118, h: 60, gap: 6, pad: 8, header: 18, labels: true}
	tinyCells     = cellStyle{w: 12, h: 12, gap: 2, pad: 4, header: 16}
)

// layout sizes the box within maxW, flowing its children into rows.
// The cluster box (no label) has no frame of its own.
func (b *topoBox) layout(maxW float64, st cellStyle) {
	if b.node != nil {
		b.w, b.h = st.w, st.h
		return
	}
	pad, header := st.pad, st.header
	if b.label == "" {
		pad, header = 0, 0
	}
	inner := maxW - 2*pad
	x, y, rowH, width := 0.0, 0.0, 0.0, 0.0
	for _, c := range b.children {
		c.layout(inner, st)
		if x > 0 && x+c.w > inner {
			x, y, rowH = 0, y+rowH+st.gap, 0
		}
		c.x, c.y = pad+x, header+pad+y
		x += c.w + st.gap
		rowH = math.Max(rowH, c.h)
		width = math.Max(width, x-st.gap)
	}
	b.w, b.h = width+2*pad, header+y+rowH+2*pad
}

// topologyMap draws nested boxes for the network domains, widest outside,
// with a cell per node striped by the jobs that ran pods there. It reports
// whether any node is tainted, for the legend.
func (r *Result) topologyMap(id string) (template.HTML, bool) {
	levels := r.Scenario.levels()
	root := &topoBox{}
	anyTainted := false
	for i := range r.Nodes {
		n := &r.Nodes[i]
		anyTainted = anyTainted || n.Tainted
		b := root
		for _, l := range levels[:len(levels)-1] {
			v := n.Labels[l.NodeLabel]
			if v == "" {
				v = unlabelled
			}
			b = b.child(l.Name + " " + v)
		}
		b.children = append(b.children, &topoBox{node: n})
	}
	st := labelledCells
	if len(r.Nodes) > 200 {
		st = tinyCells
	}
	root.layout(chartWidth, st)
	s := &svg{w: math.Max(root.w, 1), h: math.Max(root.h, 1)}
	tainted := id + "-tainted"
	s.hatch(tainted, taintedColor)
	var draw func(b *topoBox, x, y float64, depth int)
	draw = func(b *topoBox, x, y float64, depth int) {
		x, y = x+b.x, y+b.y
		switch {
		case b.node != nil:
			r.drawNode(s, b.node, x, y, st, "url(#"+tainted+")")
			return
		case b.label != "":
			fill := [2]string{"#f3f6fa", "#e6edf5"}[depth%2]
			s.add(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" rx="4" fill="%s" stroke="#9fb3c8">%s</rect>`, x, y, b.w, b.h, fill, tooltip("%s", b.label))
			s.text(x+st.pad, y+13, `class="domain"`, clip(b.label, int(b.w/6.5)))
		}
		for _, c := range b.children {
			draw(c, x, y, depth+1)
		}
	}
	draw(root, 0, 0, 0)
	return s.html(), anyTainted
}

// drawNode draws one node cell and the stripes of the jobs that ran there:
// a stripe is pods × max(1, GPUs per pod) wide relative to the node's GPUs
// (to its pods on CPU nodes), scaled down when jobs took turns on the node.
func (r *Result) drawNode(s *svg, n *NodeResult, x, y float64, st cellStyle, taintFill string) {
	fill := "#fff"
	var notes []string
	if n.Tainted {
		fill, notes = taintFill, append(notes, "tainted")
	}
	if n.Zones > 0 {
		notes = append(notes, fmt.Sprintf("%d NUMA zones", n.Zones))
	}
	capLabel := fmt.Sprintf("%d GPUs", n.GPUs)
	if n.GPUs == 0 {
		capLabel = strconv.FormatFloat(float64(n.CPU)/1000, 'f', -1, 64) + " cores"
	}
	s.add(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" rx="2" fill="%s" stroke="#8a8a8a">%s</rect>`,
		x, y, st.w, st.h, fill, tooltip("%s", strings.Join(append([]string{n.Name, capLabel}, notes...), ", ")))
	barX, barY, barW, barH := x, y, st.w, st.h
	if st.labels {
		s.text(x+5, y+13, `class="node"`, clip(n.Name, 18))
		s.text(x+5, y+26, "", capLabel)
		if len(notes) > 0 {
			s.text(x+5, y+38, `class="note"`, clip(strings.Join(notes, ", "), 20))
		}
		barX, barY, barW, barH = x+5, y+st.h-15, st.w-10, 10
		s.add(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#ececec"/>`, barX, barY, barW, barH)
	}
	type stripe struct {
		job   int
		units float64
	}
	var stripes []stripe
	var total, pods float64
	for i, j := range r.Jobs {
		if p := j.Nodes[n.Name]; p > 0 {
			u := float64(p) * float64(max(1, j.Job.GPUs))
			stripes = append(stripes, stripe{i, u})
			total += u
			pods += float64(p)
		}
	}
	capacity := float64(n.GPUs)
	if capacity == 0 {
		capacity = pods
	}
	unit := barW / math.Max(capacity, total)
	for _, sp := range stripes {
		j := r.Jobs[sp.job]
		w := sp.units * unit
		s.add(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s">%s</rect>`, barX, barY, w, barH, color(sp.job),
			tooltip("%s: %d pods on %s", j.Job.Key(), j.Nodes[n.Name], n.Name))
		barX += w
	}
}

var pageTemplate = template.Must(template.New("page").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>phalanx-sim report</title>
<style>
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;color:#222;max-width:1000px;margin:0 auto;padding:1em 1.5em 4em}
h1{margin-bottom:.2em}
h2{margin-top:0;padding-top:1em}
h3{margin:1.6em 0 .3em;font-size:16px}
.muted{color:#666}
.summary{font-size:13px;color:#444;background:#f6f6f6;padding:.4em .7em;border-radius:4px}
.caption{color:#555;font-size:13px;margin:.2em 0 .6em;max-width:60em}
section{border-top:2px solid #ddd;margin-top:2.5em}
.badge{display:inline-block;padding:0 .55em;border-radius:.8em;font-size:12px;font-weight:600;color:#fff;margin-left:.4em}
.pass{background:#2e7d32}.fail{background:#c62828}
.verdict{padding:.6em 1em;border-radius:6px;margin:1em 0}
.verdict.ok{background:#e8f5e9;border:1px solid #a5d6a7;color:#1b5e20}
.verdict.bad{background:#ffebee;border:1px solid #ef9a9a;color:#b71c1c}
.verdict ul{margin:.3em 0 0;padding-left:1.4em}
table{border-collapse:collapse;font-size:13px;margin:.4em 0}
th,td{padding:3px 8px;border-bottom:1px solid #e3e3e3;text-align:left;vertical-align:top}
th{background:#f3f3f3}
td.num{text-align:right}
tr.has-reason td{border-bottom:none}
tr.reason td{color:#a33;font-size:12px;padding-top:0}
.sw{display:inline-block;width:.9em;height:.9em;border-radius:2px;vertical-align:-.1em;margin-right:.35em}
.sw.line{height:3px;vertical-align:.25em}
.sw.dash{background-color:transparent!important;height:0;border-top:2px dashed;vertical-align:.25em}
.sw.hatch{background-image:repeating-linear-gradient(45deg,rgba(0,0,0,.18) 0 2px,transparent 2px 5px)}
.legend{font-size:13px;margin:.3em 0}
.legend span{display:inline-block;margin-right:1.2em;white-space:nowrap}
svg{max-width:100%;height:auto;display:block}
svg text{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;font-size:11px;fill:#333}
svg text.title{font-size:12px;fill:#555}
svg text.domain{font-weight:600;fill:#34495e}
svg text.node{font-weight:600}
svg text.note{fill:#795548;font-size:10px}
svg .grid{stroke:#e4e4e4}
svg .axis{stroke:#888}
pre,code{font-size:12px}
</style>
</head>
<body>
<h1>phalanx-sim report</h1>
<p class="muted">Generated {{.Generated}}.</p>
<p>Each scenario below ran on a fresh in-process cluster: etcd, kube-apiserver, kwok playing the kubelet
(it starts bound pods and completes them after their run time), and phalanx-scheduler.
The simulator submitted the scenario's jobs at their arrival times and sampled the cluster about every 100&nbsp;ms.
A scenario passes when every job met its expectation, no gang was left partially bound, gangs stayed
inside their required network domain, queue shares were within tolerance and no pod broke NUMA alignment.</p>
<h2 style="padding-top:.5em">Scenarios</h2>
<ol>
{{- range .Scenarios}}
<li><a href="#{{.ID}}">{{.Name}}</a>{{if .Errors}}<span class="badge fail">FAIL · {{len .Errors}}</span>{{else}}<span class="badge pass">PASS</span>{{end}}</li>
{{- end}}
</ol>
{{range .Scenarios}}
<section id="{{.ID}}">
<h2>{{.Name}}</h2>
{{range .Paragraphs}}<p>{{.}}</p>
{{end -}}
<p class="summary">{{.Summary}}</p>
{{if .Errors -}}
<div class="verdict bad"><strong>Expectations NOT met:</strong><ul>{{range .Errors}}<li>{{.}}</li>{{end}}</ul></div>
{{- else -}}
<div class="verdict ok"><strong>All expectations met:</strong> every gang started whole or not at all, and every stated expectation held.</div>
{{- end}}

<h3>Jobs</h3>
<p class="caption">One row per job, in submission order; the swatch is the job's colour in the charts below.
<em>Whole</em> says whether a gang reached minMember at once (PARTIAL n: n members were bound but the gang never reached quorum);
<em>wait</em> is the time from submission to quorum; <em>domain</em> is the network domain the job ran in; <em>done</em> counts completed pods.</p>
<table>
<tr><th>job</th><th>queue</th><th>pods</th><th>minMember</th><th>started</th><th>whole</th><th>wait</th><th>domain</th><th>nodes</th><th>done</th></tr>
{{- range .Jobs}}
<tr{{if not .Ran}} class="has-reason"{{end}}><td><i class="sw" style="background-color:{{.Color}}"></i>{{.Key}}</td><td>{{.Queue}}</td><td class="num">{{.Pods}}</td><td class="num">{{.Min}}</td><td>{{.Started}}</td><td>{{.Whole}}</td><td>{{.Wait}}</td><td>{{.Domain}}</td><td>{{.Nodes}}</td><td>{{.Done}}</td></tr>
{{- if not .Ran}}
<tr class="reason"><td></td><td colspan="9">not started: {{.Reason}}</td></tr>
{{- end}}
{{- end}}
</table>

{{if .Timeline}}
<h3>Job timeline</h3>
<p class="caption">Each row is a job; time runs left to right in seconds since the run started. The grey bar is the job waiting
from submission until its gang (or all its pods) was bound; the coloured bar is it running until its last pod completed
(a bar reaching the right edge was still running when the run ended). A red hatched bar is a job that never started. Hover a bar for exact times.</p>
{{.Timeline}}
{{template "legend" $.TimelineLegend}}
{{end}}

<h3>Utilization over time</h3>
<p class="caption">The share of the cluster's GPUs and CPU cores (on untainted nodes) requested by running pods, one point per sample;
100% means every GPU (or core) was in use.</p>
{{.Utilization}}
{{template "legend" .UtilLegend}}
<p>{{range $i, $s := .UtilStats}}{{if $i}} · {{end}}{{$s}}{{end}}</p>

{{if .Shares}}
<h3>Queue shares over time</h3>
<p class="caption">Each band is a queue's share of the {{.ShareUnit}} in use by all queues at that moment, stacked in the scenario's queue order
(space above the top band is used by other queues, e.g. the default one; a drop to 0 means nothing ran).
Dashed lines are where the band tops should sit if every queue held its expected share.</p>
{{.Shares}}
{{template "legend" .ShareLegend}}
<p class="caption">Measured share: the queue's mean share of the {{.ShareUnit}} in use, over the samples in which every queue with an expected share
(or every queue, if none has one) had pods waiting, so it is what fairness gave rather than what demand left.</p>
<table>
<tr><th>queue</th><th>weight</th><th>measured share</th><th>expected</th><th>verdict</th></tr>
{{- range .ShareRows}}
<tr><td>{{.Name}}</td><td class="num">{{.Weight}}</td><td>{{.Share}}</td><td>{{.Expect}}</td><td>{{if .Verdict}}<span class="badge {{.Verdict}}">{{.Verdict}}</span>{{else}}-{{end}}</td></tr>
{{- end}}
</table>
{{end}}

<h3>Where each job ran</h3>
<p class="caption">Boxes are network domains, widest outside; each cell inside is a node (name, capacity). The coloured stripes at a node's
bottom are the jobs that had pods there during the run: a stripe's width is the job's pods there × its GPUs per pod, relative to
the node's GPUs (its pods, on CPU-only nodes); jobs that took turns on a node are scaled to fit, and the light grey rest is capacity no job used. Hover a stripe for the pod count.</p>
{{.Topology}}
{{template "legend" .JobLegend}}

{{if .NotStarted}}
<h3>Not started, and why</h3>
<ul>
{{- range .NotStarted}}
<li><strong>{{.Key}}</strong>: {{.Reason}}</li>
{{- end}}
</ul>
{{end}}

{{if .NUMANodes}}
<h3>NUMA</h3>
{{if .NUMAErrors -}}
<p>Pods the kubelet would reject (its Topology Manager could not align them to the node's NUMA zones):</p>
<ul>{{range .NUMAErrors}}<li>{{.}}</li>{{end}}</ul>
{{- else -}}
<p>Nodes with NUMA zones: {{.NUMANodes}}. Every pod running on them fit its zones at every sample, as the kubelet assigns them.</p>
{{- end}}
{{end}}
</section>
{{end}}
</body>
</html>
{{define "legend"}}<div class="legend">{{range .}}<span><i class="sw {{.Class}}" style="background-color:{{.Color}};color:{{.Color}}"></i>{{.Label}}</span>{{end}}</div>{{end}}
`))
