package report

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/phalanx-sched/phalanx/internal/sim"
	"github.com/phalanx-sched/phalanx/internal/sim/chart"
)

// WriteHTML writes one self-contained page (inline CSS and SVG, no scripts,
// nothing fetched) reporting every result: its verdict, jobs, timeline,
// utilization, queue shares and where each job ran.
func WriteHTML(w io.Writer, results []*sim.Result) error {
	page := htmlPage{
		Generated: time.Now().Format("2006-01-02 15:04:05 MST"),
		TimelineLegend: []chart.LegendItem{
			{Color: chart.WaitColor, Label: "waiting"},
			{Color: chart.Color(0), Label: "running (in the job's colour)"},
			{Color: chart.NeverColor, Label: "never started", Class: "hatch"},
		},
	}
	for i, r := range results {
		page.Scenarios = append(page.Scenarios, scenarioPage(r, fmt.Sprintf("s%d", i)))
	}
	return pageTemplate.Execute(w, page)
}

type htmlPage struct {
	Generated      string
	TimelineLegend []chart.LegendItem
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
	UtilLegend  []chart.LegendItem
	UtilStats   []string
	Shares      template.HTML
	ShareLegend []chart.LegendItem
	ShareRows   []htmlShare
	ShareUnit   string
	Topology    template.HTML
	JobLegend   []chart.LegendItem
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

// jobCells are a job's columns in the jobs table, as the text report has them.
type jobCells struct{ Min, Started, Whole, Wait, Done string }

func cells(j *sim.JobResult) jobCells {
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
func why(j *sim.JobResult) string {
	if j.Reason == "" {
		return "no condition written"
	}
	return j.Reason
}

func scenarioPage(r *sim.Result, id string) htmlScenario {
	sc := r.Scenario
	s := htmlScenario{
		ID: id, Name: sc.Name, Summary: summary(r), ShareUnit: shareUnit(r),
		NUMANodes: len(numaNodes(r)), NUMAErrors: r.NUMAViolations,
	}
	for _, p := range strings.Split(strings.TrimSpace(sc.Description), "\n\n") {
		if p = strings.TrimSpace(p); p != "" {
			s.Paragraphs = append(s.Paragraphs, p)
		}
	}
	for _, err := range Check(r) {
		s.Errors = append(s.Errors, err.Error())
	}
	for i, j := range r.Jobs {
		row := htmlJob{
			jobCells: cells(j), Key: j.Job.Key(), Queue: orDash(j.Job.Queue), Domain: orDash(Domain(r, j)),
			Nodes: nodeList(j.Nodes), Color: chart.Color(i), Pods: j.Job.Replicas, Ran: j.Ran(),
		}
		if !j.Ran() {
			row.Reason = why(j)
			s.NotStarted = append(s.NotStarted, row)
		}
		s.Jobs = append(s.Jobs, row)
		if len(j.Nodes) > 0 {
			s.JobLegend = append(s.JobLegend, chart.LegendItem{Color: row.Color, Label: row.Key})
		}
	}
	if len(r.Jobs) > 0 {
		s.Timeline = timeline(r, id)
	}
	s.Utilization, s.UtilLegend, s.UtilStats = utilizationChart(r)
	if len(sc.Queues) > 0 {
		s.Shares, s.ShareLegend = sharesChart(r)
		for _, q := range QueueShares(r) {
			row := htmlShare{Name: q.Name, Weight: fmt.Sprint(q.Weight), Share: "-", Expect: "-"}
			if q.Samples > 0 {
				row.Share = fmt.Sprintf("%.0f%% over %d samples", q.Share*100, q.Samples)
			}
			if q.Expect != nil {
				row.Expect = fmt.Sprintf("%.0f%% ± %.0f%%", *q.Expect*100, sc.ShareTolerance*100)
				row.Verdict = "fail"
				if shareOK(r, q) {
					row.Verdict = "pass"
				}
			}
			s.ShareRows = append(s.ShareRows, row)
		}
	}
	var tainted bool
	s.Topology, tainted = topologyMap(r, id)
	if tainted {
		s.JobLegend = append(s.JobLegend, chart.LegendItem{Color: chart.TaintedColor, Label: "tainted node (no job may use it)", Class: "hatch"})
	}
	return s
}

// shareOK is Check's verdict on a queue with an expected share.
func shareOK(r *sim.Result, q QueueShare) bool {
	return q.Samples > 0 && math.Abs(q.Share-*q.Expect) <= r.Scenario.ShareTolerance
}

func summary(r *sim.Result) string {
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
	for _, l := range sc.Levels() {
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
