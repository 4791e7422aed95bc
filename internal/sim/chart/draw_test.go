package chart

import (
	"encoding/xml"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestScalePx(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    Scale
		v    float64
		want float64
	}{
		{"low end", Scale{0, 10, 50, 950}, 0, 50},
		{"high end", Scale{0, 10, 50, 950}, 10, 950},
		{"middle", Scale{0, 10, 50, 950}, 5, 500},
		{"upwards y", Scale{0, 1, 200, 12}, 0.25, 153},
		{"empty span", Scale{3, 3, 40, 90}, 7, 40},
	} {
		if got := tc.s.Px(tc.v); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: Px(%v) = %v, want %v", tc.name, tc.v, got, tc.want)
		}
	}
}

// TestDarker: every channel of every palette colour is halved.
func TestDarker(t *testing.T) {
	channels := func(c string) [3]uint64 {
		var out [3]uint64
		for i := range out {
			v, err := strconv.ParseUint(c[1+2*i:3+2*i], 16, 8)
			if err != nil {
				t.Fatalf("%s: %v", c, err)
			}
			out[i] = v
		}
		return out
	}
	for i := range palette {
		c := Color(i)
		d := Darker(c)
		in, out := channels(c), channels(d)
		for k := range in {
			if out[k] != in[k]/2 {
				t.Errorf("Darker(%s) = %s: channel %d is %d, want %d", c, d, k, out[k], in[k]/2)
			}
		}
	}
}

func TestColorRepeats(t *testing.T) {
	seen := map[string]bool{}
	for i := range palette {
		if seen[Color(i)] {
			t.Errorf("colour %d repeats %s within the palette", i, Color(i))
		}
		seen[Color(i)] = true
		if Color(i) != Color(i+len(palette)) {
			t.Errorf("Color(%d) and Color(%d) differ", i, i+len(palette))
		}
	}
}

func TestTrimFloat(t *testing.T) {
	for v, want := range map[float64]string{1: "1", 0.5: "0.5", 1.23456: "1.235", 2.0004: "2", 0: "0", 120: "120"} {
		if got := TrimFloat(v); got != want {
			t.Errorf("TrimFloat(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestClip(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exact", 5, "exact"},
		{"héllo wörld", 5, "héll…"},
		{"gpu-node-17", 4, "gpu…"},
	} {
		if got := Clip(tc.in, tc.n); got != tc.want {
			t.Errorf("Clip(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

// TestTicksRound: ticks start at 0, step evenly by 1, 2 or 5 × 10ⁿ (2.5 ×
// 10ⁿ at most once removed), and cover the limit without passing it.
func TestTicksRound(t *testing.T) {
	for _, limit := range []float64{0.3, 1, 7, 47, 99, 130, 3600, 86400} {
		ticks := Ticks(limit, 10)
		if ticks[0] != 0 || len(ticks) < 2 {
			t.Fatalf("Ticks(%v) = %v", limit, ticks)
		}
		step := ticks[1]
		mant := step / math.Pow(10, math.Floor(math.Log10(step)))
		if !isOneOf(mant, 1, 2, 2.5, 5) {
			t.Errorf("Ticks(%v): step %v is not a round value", limit, step)
		}
		for i, v := range ticks {
			if math.Abs(v-float64(i)*step) > 1e-9*limit {
				t.Errorf("Ticks(%v): tick %d is %v, want %v", limit, i, v, float64(i)*step)
			}
		}
		last := ticks[len(ticks)-1]
		if last > limit*(1+1e-9) || last+step <= limit {
			t.Errorf("Ticks(%v): last tick %v with step %v", limit, last, step)
		}
		if len(ticks) > 11 || len(ticks) < 4 {
			t.Errorf("Ticks(%v): %d ticks, want about 10", limit, len(ticks))
		}
	}
}

func isOneOf(v float64, among ...float64) bool {
	for _, a := range among {
		if math.Abs(v-a) < 1e-9 {
			return true
		}
	}
	return false
}

// TestSVGEscapes: labels and tooltips are escaped, the image declares its
// size and is well-formed XML.
func TestSVGEscapes(t *testing.T) {
	s := &SVG{W: 300, H: 120}
	s.Text(10, 20, `class="node"`, `<gpu & "cpu">`)
	s.Add(`<rect x="0" y="0" width="1" height="1">%s</rect>`, Tooltip("%s: %d", "a<b", 3))
	s.Hatch("h", NeverColor)
	out := string(s.HTML())
	for _, want := range []string{`viewBox="0 0 300 120" width="300" height="120"`, "&lt;gpu &amp; &#34;cpu&#34;&gt;", "<title>a&lt;b: 3</title>", `<pattern id="h"`, `fill="` + NeverColor + `"`} {
		if !strings.Contains(out, want) {
			t.Errorf("svg lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "<gpu") || strings.Contains(out, "a<b") {
		t.Errorf("svg has unescaped text:\n%s", out)
	}
	if err := xml.Unmarshal([]byte(out), new(struct{})); err != nil {
		t.Errorf("svg: %v\n%s", err, out)
	}
}

// TestAxes: one grid line and one label per tick, inside the plot area, and
// the titles.
func TestAxes(t *testing.T) {
	c := New(200, 50, 40, 8, 1)
	c.XAxis("time <s>")
	c.YPercent("in use")
	out := string(c.HTML())
	xs := Ticks(8, 10)
	for _, v := range xs {
		if !strings.Contains(out, ">"+TrimFloat(v)+"s</text>") {
			t.Errorf("x axis lacks the label %vs", v)
		}
	}
	for _, v := range Ticks(1, 5) {
		if !strings.Contains(out, fmt.Sprintf(">%.0f%%</text>", v*100)) {
			t.Errorf("y axis lacks the label %.0f%%", v*100)
		}
	}
	grid := regexp.MustCompile(`<line class="grid" x1="([0-9.]+)" y1="([0-9.]+)" x2="([0-9.]+)" y2="([0-9.]+)"/>`).FindAllStringSubmatch(out, -1)
	if len(grid) != len(xs)+len(Ticks(1, 5)) {
		t.Errorf("%d grid lines, want %d", len(grid), len(xs)+len(Ticks(1, 5)))
	}
	for _, g := range grid {
		for k, f := range g[1:] {
			v, _ := strconv.ParseFloat(f, 64)
			limit := float64(Width)
			if k%2 == 1 { // y1, y2
				limit = 200
			}
			if v < 0 || v > limit {
				t.Errorf("grid line %s outside the chart", g[0])
			}
		}
	}
	if !strings.Contains(out, "time &lt;s&gt;</text>") || !strings.Contains(out, ">in use</text>") {
		t.Errorf("axis titles missing or unescaped:\n%s", out)
	}
	if c.X.To != Width-24 || c.Y.From != 160 || c.Y.To != 12 {
		t.Errorf("plot area x %v..%v, y %v..%v", c.X.From, c.X.To, c.Y.From, c.Y.To)
	}
	if err := xml.Unmarshal([]byte(out), new(struct{})); err != nil {
		t.Error(err)
	}
}
