// Package chart draws the simulator reports' inline SVG charts: scales,
// axes, labels with tooltips, and the colours a job or a scheduler keeps
// across every chart of a page. Reports stay self-contained: no scripts,
// nothing fetched.
package chart

import (
	"fmt"
	"html"
	"html/template"
	"math"
	"strconv"
	"strings"
)

// Colours. A job keeps its palette colour in the table, the timeline and the
// topology map; greys and red are left for waiting, tainted and never started,
// light enough that labels on them stay readable.
var palette = []string{
	"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
	"#393b79", "#aec7e8", "#ffbb78", "#98df8a", "#c5b0d5", "#637939", "#f7b6d2", "#9edae5",
}

// Colours of what is not a job.
const (
	WaitColor    = "#c7c7c7"
	NeverColor   = "#f4b6b6"
	NeverStroke  = "#c62828"
	TaintedColor = "#dcdcdc"
	GPUColor     = "#1f77b4"
	CPUColor     = "#ff7f0e"
)

// Color is the palette's i-th colour, the palette repeating.
func Color(i int) string { return palette[i%len(palette)] }

// Darker halves a #rrggbb colour's brightness, so a dashed line stands out
// on the band of the same colour.
func Darker(c string) string {
	v, _ := strconv.ParseUint(c[1:], 16, 32) // palette colours are all #rrggbb
	return fmt.Sprintf("#%06x", (v>>1)&0x7f7f7f)
}

// LegendItem is a swatch and its label; Class picks the swatch's shape
// (solid, line, dash, hatch).
type LegendItem struct{ Color, Label, Class string }

// SVG accumulates the elements of one inline SVG image of W × H pixels.
type SVG struct {
	b    strings.Builder
	W, H float64
}

// Add writes one element.
func (s *SVG) Add(format string, a ...any) {
	fmt.Fprintf(&s.b, format, a...)
	s.b.WriteByte('\n')
}

// Text writes an escaped label; attrs are extra attributes, written as is.
func (s *SVG) Text(x, y float64, attrs, label string) {
	s.Add(`<text x="%.1f" y="%.1f" %s>%s</text>`, x, y, attrs, html.EscapeString(label))
}

// Hatch defines a pattern of dark diagonal stripes over colour c, like the
// legend's hatched swatches.
func (s *SVG) Hatch(id, c string) {
	s.Add(`<defs><pattern id="%s" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="%s"/><line x1="0" y1="0" x2="0" y2="6" stroke="#000" stroke-width="2" stroke-opacity=".18"/></pattern></defs>`, id, c)
}

// HTML is the finished image.
func (s *SVG) HTML() template.HTML {
	return template.HTML(fmt.Sprintf(`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %.0f %.0f" width="%.0f" height="%.0f">`+"\n%s</svg>", s.W, s.H, s.W, s.H, s.b.String()))
}

// Tooltip is an SVG <title> child: the browser shows it on hover.
func Tooltip(format string, a ...any) string {
	return "<title>" + html.EscapeString(fmt.Sprintf(format, a...)) + "</title>"
}

// Scale maps data values in [Lo, Hi] onto pixels [From, To].
type Scale struct{ Lo, Hi, From, To float64 }

// Px is v's pixel.
func (s Scale) Px(v float64) float64 {
	if s.Hi == s.Lo {
		return s.From
	}
	return s.From + (v-s.Lo)/(s.Hi-s.Lo)*(s.To-s.From)
}

// Chart is an SVG with a plot area and the scales onto it.
type Chart struct {
	SVG
	X, Y Scale
}

// Width is every chart's width in pixels.
const Width = 960

// New makes a chart Width wide and height high whose x axis is 0..xmax and
// y axis 0..ymax upwards; left and bottom are the margins for the axes'
// labels.
func New(height, left, bottom, xmax, ymax float64) *Chart {
	const top, right = 12, 24
	return &Chart{
		SVG: SVG{W: Width, H: height},
		X:   Scale{0, xmax, left, Width - right},
		Y:   Scale{0, ymax, height - bottom, top},
	}
}

// XAxis draws vertical grid lines, the ticks in seconds and the axis title.
func (c *Chart) XAxis(title string) {
	top, bottom := math.Min(c.Y.From, c.Y.To), math.Max(c.Y.From, c.Y.To)
	for _, v := range Ticks(c.X.Hi, 10) {
		x := c.X.Px(v)
		c.Add(`<line class="grid" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`, x, top, x, bottom)
		c.Text(x, bottom+15, `text-anchor="middle"`, TrimFloat(v)+"s")
	}
	c.Add(`<line class="axis" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`, c.X.From, bottom, c.X.To, bottom)
	c.Text((c.X.From+c.X.To)/2, bottom+32, `class="title" text-anchor="middle"`, title)
}

// YPercent draws horizontal grid lines at 0..100% of a 0..1 y scale.
func (c *Chart) YPercent(title string) {
	for _, v := range Ticks(1, 5) {
		y := c.Y.Px(v)
		c.Add(`<line class="grid" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`, c.X.From, y, c.X.To, y)
		c.Text(c.X.From-6, y+4, `text-anchor="end"`, fmt.Sprintf("%.0f%%", v*100))
	}
	c.Add(`<line class="axis" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`, c.X.From, c.Y.From, c.X.From, c.Y.To)
	mid := (c.Y.From + c.Y.To) / 2
	c.Text(14, mid, fmt.Sprintf(`class="title" text-anchor="middle" transform="rotate(-90 14 %.1f)"`, mid), title)
}

// Ticks returns round values (steps of 1, 2 or 5 × 10ⁿ) from 0 to limit,
// about n of them.
func Ticks(limit float64, n int) []float64 {
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

// TrimFloat writes v to three decimals at most, without trailing zeros.
func TrimFloat(v float64) string {
	return strconv.FormatFloat(math.Round(v*1000)/1000, 'f', -1, 64)
}

// Clip shortens s to n runes, marking the cut.
func Clip(s string, n int) string {
	if rs := []rune(s); len(rs) > n {
		return string(rs[:n-1]) + "…"
	}
	return s
}
