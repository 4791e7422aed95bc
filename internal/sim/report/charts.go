package report

import (
	"fmt"
	"html"
	"html/template"
	"math"
	"strings"
	"time"

	"github.com/phalanx-sched/phalanx/internal/sim"
	"github.com/phalanx-sched/phalanx/internal/sim/chart"
)

// newChart makes a chart of the given height whose x axis is the run's
// seconds and y axis 0..ymax upwards; left and bottom are the margins for
// the axes' labels.
func newChart(r *sim.Result, height, left, bottom, ymax float64) *chart.Chart {
	return chart.New(height, left, bottom, seconds(r), ymax)
}

// seconds is the run's length, never 0, so time axes always have a span.
func seconds(r *sim.Result) float64 {
	if r.Elapsed <= 0 {
		return 1
	}
	return r.Elapsed.Seconds()
}

// timeline is a Gantt chart: per job, the wait from submission to quorum,
// then the run until the last pod completed (or the run ended).
func timeline(r *sim.Result, id string) template.HTML {
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
	c.Y = chart.Scale{Lo: 0, Hi: float64(len(r.Jobs)), From: 12, To: 12 + rowH*float64(len(r.Jobs))} // row i's top, first job at the top
	never := id + "-never"
	c.Hatch(never, chart.NeverColor)
	for i := range r.Jobs {
		if i%2 == 1 {
			c.Add(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#f7f7f7"/>`, c.X.From, c.Y.Px(float64(i)), c.X.To-c.X.From, rowH)
		}
	}
	c.XAxis("seconds since the run started")
	barH := rowH * 0.7
	for i, j := range r.Jobs {
		key := j.Job.Key()
		y := c.Y.Px(float64(i)) + (rowH-barH)/2
		c.Add(`<text x="%.1f" y="%.1f" text-anchor="end" style="font-size:%.0fpx">%s%s</text>`,
			left-6, y+barH/2+font/3, font, html.EscapeString(chart.Clip(key, int((left-16)/(font*0.6)))), chart.Tooltip("%s", key))
		bar := func(from, to time.Duration, fill, attrs, tip string) {
			x0, x1 := c.X.Px(from.Seconds()), c.X.Px(to.Seconds())
			c.Add(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" %s>%s</rect>`, x0, y, math.Max(x1-x0, 1), barH, fill, attrs, tip)
		}
		if !j.Ran() {
			bar(j.Submitted, r.Elapsed, "url(#"+never+")", `stroke="`+chart.NeverStroke+`"`,
				chart.Tooltip("%s: submitted at %.1fs, never started: %s", key, j.Submitted.Seconds(), why(j)))
			c.Text(c.X.Px(j.Submitted.Seconds())+4, y+barH/2+font/3, fmt.Sprintf(`style="font-size:%.0fpx;font-weight:600" fill="#8b0000"`, font), "never started")
			continue
		}
		bar(j.Submitted, j.QuorumAt, chart.WaitColor, "", chart.Tooltip("%s: waited %.1fs (%.1fs → %.1fs)", key, j.Wait().Seconds(), j.Submitted.Seconds(), j.QuorumAt.Seconds()))
		end, state := j.FinishedAt, "finished"
		if end == 0 {
			end, state = r.Elapsed, "still running at the end"
		}
		bar(j.QuorumAt, end, chart.Color(i), "", chart.Tooltip("%s: running %.1fs → %.1fs, %s", key, j.QuorumAt.Seconds(), end.Seconds(), state))
	}
	return c.HTML()
}

// utilizationChart plots the GPUs and CPU in use, in percent of the
// untainted nodes' capacity, with their average and peak.
func utilizationChart(r *sim.Result) (template.HTML, []chart.LegendItem, []string) {
	c := newChart(r, 260, 56, 44, 1)
	c.YPercent("% of capacity in use")
	c.XAxis("seconds since the run started")
	var legend []chart.LegendItem
	var stats []string
	series := func(name, col string, capacity int64, used func(sim.Sample) int64) {
		if capacity == 0 {
			return
		}
		frac := func(s sim.Sample) float64 { return float64(used(s)) / float64(capacity) }
		var pts []string
		for _, s := range r.Samples {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", c.X.Px(s.At.Seconds()), c.Y.Px(frac(s))))
		}
		c.Add(`<polyline fill="none" stroke="%s" stroke-width="2" points="%s">%s</polyline>`, col, strings.Join(pts, " "), chart.Tooltip("%s in use", name))
		avg, peak := utilization(r, frac)
		legend = append(legend, chart.LegendItem{Color: col, Label: name, Class: "line"})
		stats = append(stats, fmt.Sprintf("%s: average %.0f%%, peak %.0f%%", name, avg*100, peak*100))
	}
	series("GPU", chart.GPUColor, r.GPUs, func(s sim.Sample) int64 { return s.GPUUsed })
	series("CPU", chart.CPUColor, r.CPU, func(s sim.Sample) int64 { return s.CPUUsed })
	return c.HTML(), legend, stats
}

// sharesChart stacks, per sample, each scenario queue's share of what all
// queues used; dashed lines mark where the bands' tops should be if every
// queue held its expected share.
func sharesChart(r *sim.Result) (template.HTML, []chart.LegendItem) {
	qs := r.Scenario.Queues
	c := newChart(r, 260, 56, 44, 1)
	c.YPercent("share of " + shareUnit(r) + " in use")
	c.XAxis("seconds since the run started")
	// tops[k][i] is the top of queue k's band at sample i.
	tops := make([][]float64, len(qs))
	for k := range tops {
		tops[k] = make([]float64, len(r.Samples))
	}
	for i, s := range r.Samples {
		cum := 0.0
		for k, q := range qs {
			share, _ := share(s, q.Name)
			cum += share
			tops[k][i] = cum
		}
	}
	var legend []chart.LegendItem
	for k, q := range qs {
		var pts []string
		for i, s := range r.Samples {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", c.X.Px(s.At.Seconds()), c.Y.Px(tops[k][i])))
		}
		for i := len(r.Samples) - 1; i >= 0; i-- {
			bottom := 0.0
			if k > 0 {
				bottom = tops[k-1][i]
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", c.X.Px(r.Samples[i].At.Seconds()), c.Y.Px(bottom)))
		}
		c.Add(`<polygon fill="%s" fill-opacity=".8" points="%s">%s</polygon>`, chart.Color(k), strings.Join(pts, " "), chart.Tooltip("queue %s", q.Name))
		legend = append(legend, chart.LegendItem{Color: chart.Color(k), Label: "queue " + q.Name})
	}
	// A band's expected top is defined while every queue below it has an
	// expected share too.
	expected := 0.0
	for k, q := range qs {
		if q.ExpectShare == nil {
			break
		}
		expected += *q.ExpectShare
		y := c.Y.Px(math.Min(expected, 1))
		c.Add(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2" stroke-dasharray="6 4">%s</line>`,
			c.X.From, y, c.X.To, y, chart.Darker(chart.Color(k)), chart.Tooltip("expected top of queue %s: %.0f%%", q.Name, expected*100))
		legend = append(legend, chart.LegendItem{Color: chart.Darker(chart.Color(k)), Label: fmt.Sprintf("expected top of %s (%.0f%%)", q.Name, expected*100), Class: "dash"})
	}
	return c.HTML(), legend
}
