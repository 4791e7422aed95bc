package chart

import "testing"

func TestHTMLTicks(t *testing.T) {
	for _, c := range []struct {
		max  float64
		n    int
		want []float64
	}{
		{1, 5, []float64{0, 0.2, 0.4, 0.6, 0.8, 1}},
		{8, 10, []float64{0, 1, 2, 3, 4, 5, 6, 7, 8}},
		{47, 10, []float64{0, 5, 10, 15, 20, 25, 30, 35, 40, 45}},
		{0, 10, []float64{0}},
	} {
		got := Ticks(c.max, c.n)
		if len(got) != len(c.want) {
			t.Errorf("ticks(%v, %d) = %v, want %v", c.max, c.n, got, c.want)
			continue
		}
		for i := range got {
			if d := got[i] - c.want[i]; d > 1e-9 || d < -1e-9 {
				t.Errorf("ticks(%v, %d) = %v, want %v", c.max, c.n, got, c.want)
				break
			}
		}
	}
}
