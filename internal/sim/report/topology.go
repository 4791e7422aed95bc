package report

import (
	"fmt"
	"html/template"
	"math"
	"strconv"
	"strings"

	"github.com/phalanx-sched/phalanx/internal/sim"
	"github.com/phalanx-sched/phalanx/internal/sim/chart"
)

// topoBox is a box of the topology map: the cluster, a network domain, or
// a node cell. x and y are relative to the parent box.
type topoBox struct {
	label      string
	node       *sim.NodeResult
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
func topologyMap(r *sim.Result, id string) (template.HTML, bool) {
	levels := r.Scenario.Levels()
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
	root.layout(chart.Width, st)
	s := &chart.SVG{W: math.Max(root.w, 1), H: math.Max(root.h, 1)}
	tainted := id + "-tainted"
	s.Hatch(tainted, chart.TaintedColor)
	var draw func(b *topoBox, x, y float64, depth int)
	draw = func(b *topoBox, x, y float64, depth int) {
		x, y = x+b.x, y+b.y
		switch {
		case b.node != nil:
			drawNode(r, s, b.node, x, y, st, "url(#"+tainted+")")
			return
		case b.label != "":
			fill := [2]string{"#f3f6fa", "#e6edf5"}[depth%2]
			s.Add(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" rx="4" fill="%s" stroke="#9fb3c8">%s</rect>`, x, y, b.w, b.h, fill, chart.Tooltip("%s", b.label))
			s.Text(x+st.pad, y+13, `class="domain"`, chart.Clip(b.label, int(b.w/6.5)))
		}
		for _, c := range b.children {
			draw(c, x, y, depth+1)
		}
	}
	draw(root, 0, 0, 0)
	return s.HTML(), anyTainted
}

// drawNode draws one node cell and the stripes of the jobs that ran there:
// a stripe is pods × max(1, GPUs per pod) wide relative to the node's GPUs
// (to its pods on CPU nodes), scaled down when jobs took turns on the node.
func drawNode(r *sim.Result, s *chart.SVG, n *sim.NodeResult, x, y float64, st cellStyle, taintFill string) {
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
	s.Add(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" rx="2" fill="%s" stroke="#8a8a8a">%s</rect>`,
		x, y, st.w, st.h, fill, chart.Tooltip("%s", strings.Join(append([]string{n.Name, capLabel}, notes...), ", ")))
	barX, barY, barW, barH := x, y, st.w, st.h
	if st.labels {
		s.Text(x+5, y+13, `class="node"`, chart.Clip(n.Name, 18))
		s.Text(x+5, y+26, "", capLabel)
		if len(notes) > 0 {
			s.Text(x+5, y+38, `class="note"`, chart.Clip(strings.Join(notes, ", "), 20))
		}
		barX, barY, barW, barH = x+5, y+st.h-15, st.w-10, 10
		s.Add(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#ececec"/>`, barX, barY, barW, barH)
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
		s.Add(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s">%s</rect>`, barX, barY, w, barH, chart.Color(sp.job),
			chart.Tooltip("%s: %d pods on %s", j.Job.Key(), j.Nodes[n.Name], n.Name))
		barX += w
	}
}
