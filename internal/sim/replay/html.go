package replay

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"strings"
	"time"

	"github.com/phalanx-sched/phalanx/internal/sim"
	"github.com/phalanx-sched/phalanx/internal/sim/chart"
	"github.com/phalanx-sched/phalanx/internal/sim/metrics"
)

// WriteTraceHTML writes one self-contained page (inline CSS and SVG, no
// scripts) comparing the replays of one trace: the summary table, GPU
// allocation over time per scheduler, the CDF of job waits and each queue's
// share against its deserved share.
func WriteTraceHTML(w io.Writer, runs []TraceRun) error {
	page := tracePage{Generated: time.Now().Format("2006-01-02 15:04:05 MST")}
	var sums []TraceSummary
	for _, tr := range runs {
		sums = append(sums, tr.Summary())
	}
	if len(runs) > 0 {
		r0 := runs[0].Result
		page.Header = fmt.Sprintf("%d nodes, %d GPUs, %d jobs, replayed at %gx: every time below is in trace seconds (seconds of the replay × %g).",
			len(r0.Nodes), r0.GPUs, len(r0.Scenario.Jobs), runs[0].Speed, runs[0].Speed)
	}
	for _, s := range sums {
		page.Schedulers = append(page.Schedulers, s.Scheduler)
	}
	row := func(label string, f func(TraceSummary) string) {
		r := traceRow{Label: label}
		for _, s := range sums {
			r.Cells = append(r.Cells, f(s))
		}
		page.Rows = append(page.Rows, r)
	}
	for _, r := range summaryRows(sums) {
		row(r.label, r.cell)
	}
	for _, tr := range runs {
		page.Allocation = append(page.Allocation, traceChart{Title: tr.Scheduler, SVG: allocationChart(tr)})
	}
	page.AllocLegend = []chart.LegendItem{
		{Color: chart.GPUColor, Label: "GPUs allocated", Class: "line"},
		{Color: "#2ca02c", Label: "useful: held by started jobs", Class: "line"},
		{Color: chart.NeverStroke, Label: "stranded: held by gangs not started", Class: "line"},
		{Color: "#9467bd", Label: "fragmented: free, no waiting pod fits", Class: "line"},
		{Color: chart.WaitColor, Label: "jobs waiting"},
	}
	page.Where, page.Causes = whereSections(sums), strings.Join(metrics.WaitCauses, " / ")
	page.CDF = waitCDF(sums)
	page.Shares = queueShareBars(sums)
	for i, s := range sums {
		page.SchedLegend = append(page.SchedLegend, chart.LegendItem{Color: chart.Color(i), Label: s.Scheduler, Class: "line"})
	}
	return tracePageTemplate.Execute(w, page)
}

type tracePage struct {
	Generated, Header string
	Schedulers        []string
	Rows              []traceRow
	Allocation        []traceChart
	AllocLegend       []chart.LegendItem
	SchedLegend       []chart.LegendItem
	CDF, Shares       template.HTML
	Where             []whereSection
	Causes            string
}

// whereSection is one replay's idle GPUs by domain and longest waits.
type whereSection struct {
	Scheduler string
	Idle      []DomainIdle
	Waits     [][]string
}

func whereSections(sums []TraceSummary) []whereSection {
	var out []whereSection
	for _, s := range sums {
		if len(s.IdleByDomain) == 0 && len(s.LongestWaits) == 0 {
			continue
		}
		w := whereSection{Scheduler: s.Scheduler, Idle: s.IdleByDomain}
		for _, j := range s.LongestWaits {
			w.Waits = append(w.Waits, []string{j.Key, fmt.Sprintf("%d × %d", j.Pods, j.GPUsPerPod), orDash(j.Level),
				fmt.Sprintf("%.0f", j.Wait), j.outcome(), causeParts(j.Causes), orDash(j.HeldBy)})
		}
		out = append(out, w)
	}
	return out
}

type traceRow struct {
	Label string
	Cells []string
}

type traceChart struct {
	Title string
	SVG   template.HTML
}

func newTraceChart(height, xmax float64) *chart.Chart {
	if xmax <= 0 {
		xmax = 1
	}
	return chart.New(height, 56, 44, xmax, 1)
}

// allocationChart plots, as fractions of the cluster's GPUs, what was
// allocated, useful, stranded and fragmented; grey bands mark when jobs
// waited.
func allocationChart(tr TraceRun) template.HTML {
	r := tr.Result
	c := newTraceChart(240, r.Elapsed.Seconds()*tr.Speed)
	if r.GPUs == 0 {
		return c.HTML()
	}
	t := func(d time.Duration) float64 { return d.Seconds() * tr.Speed }
	for i, s := range r.Samples {
		if s.JobsWaiting == 0 {
			continue
		}
		next := r.Elapsed
		if i+1 < len(r.Samples) {
			next = r.Samples[i+1].At
		}
		x0, x1 := c.X.Px(t(s.At)), c.X.Px(t(next))
		c.Add(`<rect x="%.1f" y="%.1f" width="%.2f" height="%.1f" fill="%s" fill-opacity=".35"/>`, x0, c.Y.To, math.Max(x1-x0, 0.3), c.Y.From-c.Y.To, chart.WaitColor)
	}
	c.YPercent("% of the GPUs")
	c.XAxis("trace seconds")
	line := func(col, name string, v func(sim.Sample) int64) {
		var pts []string
		for _, s := range r.Samples {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", c.X.Px(t(s.At)), c.Y.Px(float64(v(s))/float64(r.GPUs))))
		}
		c.Add(`<polyline fill="none" stroke="%s" stroke-width="1.6" points="%s">%s</polyline>`, col, strings.Join(pts, " "), chart.Tooltip("%s", name))
	}
	line(chart.GPUColor, "GPUs allocated", func(s sim.Sample) int64 { return s.GPUUsed })
	line("#2ca02c", "useful", func(s sim.Sample) int64 { return s.UsefulGPU })
	line(chart.NeverStroke, "stranded", func(s sim.Sample) int64 { return s.StrandedGPU })
	line("#9467bd", "fragmented", func(s sim.Sample) int64 { return s.FragGPU })
	return c.HTML()
}

// waitCDF draws each scheduler's job waits as an empirical CDF.
func waitCDF(sums []TraceSummary) template.HTML {
	var xmax float64
	for _, s := range sums {
		for _, w := range s.Waits {
			xmax = math.Max(xmax, w)
		}
	}
	c := newTraceChart(280, xmax)
	c.YPercent("% of jobs")
	c.XAxis("job wait, trace seconds (until all of minMember bound; not started: until the end)")
	for i, s := range sums {
		xs, ps := metrics.CDF(s.Waits)
		pts := []string{fmt.Sprintf("%.1f,%.1f", c.X.Px(0), c.Y.Px(0))}
		prev := 0.0
		for k, x := range xs {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f %.1f,%.1f", c.X.Px(x), c.Y.Px(prev), c.X.Px(x), c.Y.Px(ps[k])))
			prev = ps[k]
		}
		c.Add(`<polyline fill="none" stroke="%s" stroke-width="2" points="%s">%s</polyline>`, chart.Color(i), strings.Join(pts, " "),
			chart.Tooltip("%s: p50 %.0fs, p95 %.0fs", s.Scheduler, s.WaitP50, s.WaitP95))
	}
	return c.HTML()
}

// queueShareBars draws, per queue, each scheduler's mean share of the GPUs
// while jobs waited as a bar, and the deserved share as a dashed mark.
func queueShareBars(sums []TraceSummary) template.HTML {
	if len(sums) == 0 || len(sums[0].Queues) == 0 {
		return ""
	}
	queues := sums[0].Queues
	const height, left, bottom = 240.0, 56.0, 40.0
	c := chart.New(height, left, bottom, 1, 1)
	ymax := 0.0
	for _, s := range sums {
		for _, q := range s.Queues {
			ymax = math.Max(ymax, math.Max(q.Share, q.Deserved))
		}
	}
	ymax = math.Min(1, math.Ceil(ymax*10+0.5)/10)
	c.Y.Hi = ymax
	for _, v := range chart.Ticks(ymax, 5) {
		y := c.Y.Px(v)
		c.Add(`<line class="grid" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`, c.X.From, y, c.X.To, y)
		c.Text(c.X.From-6, y+4, `text-anchor="end"`, fmt.Sprintf("%.0f%%", v*100))
	}
	mid := (c.Y.From + c.Y.To) / 2
	c.Text(14, mid, fmt.Sprintf(`class="title" text-anchor="middle" transform="rotate(-90 14 %.1f)"`, mid), "% of the GPUs, while jobs wait")
	groupW := (c.X.To - c.X.From) / float64(len(queues))
	barW := math.Min(60, groupW*0.8/float64(len(sums)))
	for qi, q := range queues {
		x0 := c.X.From + float64(qi)*groupW + (groupW-barW*float64(len(sums)))/2
		for si, s := range sums {
			if qi >= len(s.Queues) {
				continue
			}
			sq := s.Queues[qi]
			x := x0 + float64(si)*barW
			c.Add(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s">%s</rect>`, x+2, c.Y.Px(sq.Share), barW-4, c.Y.From-c.Y.Px(sq.Share), chart.Color(si),
				chart.Tooltip("%s, %s: share %.1f%%, deserved %.1f%%", q.Name, s.Scheduler, sq.Share*100, sq.Deserved*100))
			c.Add(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#222" stroke-width="2" stroke-dasharray="4 3"/>`, x, c.Y.Px(sq.Deserved), x+barW, c.Y.Px(sq.Deserved))
		}
		c.Text(c.X.From+float64(qi)*groupW+groupW/2, c.Y.From+18, `text-anchor="middle" class="title"`, fmt.Sprintf("%s (weight %d)", q.Name, q.Weight))
	}
	c.Add(`<line class="axis" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`, c.X.From, c.Y.From, c.X.To, c.Y.From)
	return c.HTML()
}

var tracePageTemplate = template.Must(template.New("trace").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>phalanx-sim trace report</title>
<style>
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;color:#222;max-width:1000px;margin:0 auto;padding:1em 1.5em 4em}
h1{margin-bottom:.2em}
h2{margin-top:1.6em}
h3{margin:1.2em 0 .3em;font-size:15px}
.muted{color:#666}
.caption{color:#555;font-size:13px;margin:.2em 0 .6em;max-width:60em}
table{border-collapse:collapse;font-size:13px;margin:.4em 0}
th,td{padding:3px 8px;border-bottom:1px solid #e3e3e3;text-align:left;vertical-align:top}
th{background:#f3f3f3}
td.num{text-align:right}
.sw{display:inline-block;width:.9em;height:.9em;border-radius:2px;vertical-align:-.1em;margin-right:.35em}
.sw.line{height:3px;vertical-align:.25em}
.legend{font-size:13px;margin:.3em 0}
.legend span{display:inline-block;margin-right:1.2em;white-space:nowrap}
svg{max-width:100%;height:auto;display:block}
svg text{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;font-size:11px;fill:#333}
svg text.title{font-size:12px;fill:#555}
svg .grid{stroke:#e4e4e4}
svg .axis{stroke:#888}
</style>
</head>
<body>
<h1>phalanx-sim trace report</h1>
<p class="muted">Generated {{.Generated}}.</p>
<p>The same trace replayed once per scheduler, each on a fresh in-process cluster (etcd, kube-apiserver,
kwok playing the kubelet of every node). {{.Header}}</p>
<h2>Summary</h2>
<table>
<tr><th></th>{{range .Schedulers}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr><td>{{.Label}}</td>{{range .Cells}}<td class="num">{{.}}</td>{{end}}</tr>
{{end}}</table>
<p class="caption">Useful allocation counts the GPUs of started jobs only (a gang starts when minMember members are bound at once;
plain pods count as soon as they are bound), over the time when at least one job waited. Fragmentation counts GPUs free on nodes
where no waiting pod's shape fits. A queue's deserved share is its weight's part of the GPUs, water-filled over what each queue
held and asked for.</p>
<h2>GPU allocation over time</h2>
<div class="legend">{{range .AllocLegend}}<span><i class="sw {{.Class}}" style="background:{{.Color}}"></i>{{.Label}}</span>{{end}}</div>
{{range .Allocation}}<h3>{{.Title}}</h3>
{{.SVG}}
{{end}}
<h2>Job waits</h2>
<div class="legend">{{range .SchedLegend}}<span><i class="sw {{.Class}}" style="background:{{.Color}}"></i>{{.Label}}</span>{{end}}</div>
{{.CDF}}
{{if .Where}}<h2>Where the idle GPUs were, and what the longest waits waited for</h2>
<p class="caption">Per domain, its mean free GPUs while jobs waited. Per job, its wait (trace seconds) and the parts of it
judged {{.Causes}} on the nodes' free room at each sample, and the scheduler's word that held it longest while the room was there.</p>
{{range .Where}}<h3>{{.Scheduler}}</h3>
{{if .Idle}}<table><tr><th>level</th><th>domain</th><th>GPUs</th><th>mean free while jobs waited</th></tr>
{{range .Idle}}<tr><td>{{.Level}}</td><td>{{.Domain}}</td><td class="num">{{.GPUs}}</td><td class="num">{{printf "%.1f" .Idle}}</td></tr>
{{end}}</table>{{end}}
{{if .Waits}}<table><tr><th>job</th><th>pods × GPUs</th><th>required</th><th>wait (s)</th><th>outcome</th><th>{{$.Causes}}</th><th>room held longest by</th></tr>
{{range .Waits}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table>{{end}}
{{end}}{{end}}
{{if .Shares}}<h2>Queue shares</h2>
<div class="legend">{{range .SchedLegend}}<span><i class="sw" style="background:{{.Color}}"></i>{{.Label}}</span>{{end}}<span>- - - deserved</span></div>
{{.Shares}}{{end}}
</body>
</html>
`))
