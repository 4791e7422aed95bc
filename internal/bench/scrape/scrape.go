// Package scrape reads the histograms and counters the benchmarks take from
// a scheduler's /metrics: extension point and plugin durations, scheduling
// attempts, gang plan times and API requests, and the differences of two
// reads.
package scrape

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Histograms the bench reads from a scheduler's /metrics.
const (
	extensionPointMetric = "scheduler_framework_extension_point_duration_seconds"
	pluginMetric         = "scheduler_plugin_execution_duration_seconds"
	attemptMetric        = "scheduler_scheduling_attempt_duration_seconds"
	planMetric           = "phalanx_gang_plan_duration_seconds"
	// requestsMetric counts the scheduler's API requests by method and code.
	requestsMetric = "rest_client_requests_total"
	// PluginSamplePercent is the share of scheduling cycles whose plugin
	// durations the framework records (pluginMetricsSamplePercent, a constant
	// in pkg/scheduler/schedule_one.go of v1.36; no flag or config sets it).
	PluginSamplePercent = 10
)

// Hist is the sum and count of one histogram series.
type Hist struct {
	Sum, Count float64
	// Buckets are the cumulative counts by upper bound (seconds), kept for
	// the plan histogram only (its quantiles are reported).
	Buckets map[float64]float64
}

// Quantile estimates the q-quantile as Prometheus' histogram_quantile does:
// linear within the bucket it falls in; NaN without buckets or samples.
func (h Hist) Quantile(q float64) float64 {
	if len(h.Buckets) == 0 || h.Count == 0 {
		return math.NaN()
	}
	bounds := slices.Sorted(maps.Keys(h.Buckets))
	rank := q * h.Count
	lower, below := 0.0, 0.0
	for _, b := range bounds {
		c := h.Buckets[b]
		if c >= rank {
			if c == below {
				return b
			}
			return lower + (b-lower)*(rank-below)/(c-below)
		}
		lower, below = b, c
	}
	return bounds[len(bounds)-1]
}

func addBuckets(a, b map[float64]float64, sign float64) map[float64]float64 {
	if len(a) == 0 && len(b) == 0 {
		return nil
	}
	out := make(map[float64]float64, len(a))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] += sign * v
	}
	return out
}

// Scrape is the histograms of one /metrics read, by series key
// ("name{label=value,...}").
type Scrape map[string]Hist

// ParseScrape reads the Prometheus text format and keeps the histograms the
// bench uses.
func ParseScrape(r io.Reader) (Scrape, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	out := Scrape{}
	for name, f := range families {
		switch name {
		case extensionPointMetric, pluginMetric, attemptMetric, planMetric:
		case requestsMetric:
			for _, m := range f.GetMetric() {
				if c := m.GetCounter(); c != nil {
					out[seriesKey(name, m.GetLabel())] = Hist{Count: c.GetValue()}
				}
			}
			continue
		default:
			continue
		}
		for _, m := range f.GetMetric() {
			h := m.GetHistogram()
			if h == nil {
				continue
			}
			hist := Hist{Sum: h.GetSampleSum(), Count: float64(h.GetSampleCount())}
			if name == planMetric {
				hist.Buckets = map[float64]float64{}
				for _, b := range h.GetBucket() {
					hist.Buckets[b.GetUpperBound()] = float64(b.GetCumulativeCount())
				}
			}
			out[seriesKey(name, m.GetLabel())] = hist
		}
	}
	return out, nil
}

func seriesKey(name string, labels []*dto.LabelPair) string {
	parts := make([]string, 0, len(labels))
	for _, l := range labels {
		parts = append(parts, l.GetName()+"="+l.GetValue())
	}
	sort.Strings(parts)
	return name + "{" + strings.Join(parts, ",") + "}"
}

// Sub is s minus before, series by series.
func (s Scrape) Sub(before Scrape) Scrape {
	out := Scrape{}
	for k, h := range s {
		b := before[k]
		if d := (Hist{Sum: h.Sum - b.Sum, Count: h.Count - b.Count, Buckets: addBuckets(h.Buckets, b.Buckets, -1)}); d.Count > 0 {
			out[k] = d
		}
	}
	return out
}

// WithPlans replaces s's gang plan series with those of total. The
// scheduler is a fresh process per pass, so every plan it recorded is the
// pass's own, including those made before the first scrape: a small gang
// can be planned (and bound) before /readyz answers.
func (s Scrape) WithPlans(total Scrape) Scrape {
	for k := range s {
		if name, _ := parseKey(k); name == planMetric {
			delete(s, k)
		}
	}
	for k, h := range total {
		if name, _ := parseKey(k); name == planMetric && h.Count > 0 {
			s[k] = h
		}
	}
	return s
}

// Add accumulates o into s.
func (s Scrape) Add(o Scrape) {
	for k, h := range o {
		a := s[k]
		s[k] = Hist{Sum: a.Sum + h.Sum, Count: a.Count + h.Count, Buckets: addBuckets(a.Buckets, h.Buckets, 1)}
	}
}

// labels parses a series key back into its name and labels.
func parseKey(key string) (string, map[string]string) {
	name, rest, _ := strings.Cut(key, "{")
	rest = strings.TrimSuffix(rest, "}")
	labels := map[string]string{}
	for _, kv := range strings.Split(rest, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			labels[k] = v
		}
	}
	return name, labels
}

// Cost is time spent in one extension point, or in one plugin at one
// extension point, over a run.
type Cost struct {
	// Name is "PreFilter" or "Coscheduling/PreFilter".
	Name string
	// Seconds is the total; plugin times are extrapolated from the sampled
	// cycles (× 100/PluginSamplePercent).
	Seconds float64
	Calls   float64
}

// Costs sums the scrape's time by extension point and by plugin/extension
// point, all statuses together.
func (s Scrape) Costs() (points, plugins map[string]Cost) {
	points, plugins = map[string]Cost{}, map[string]Cost{}
	for key, h := range s {
		name, l := parseKey(key)
		switch name {
		case extensionPointMetric:
			c := points[l["extension_point"]]
			c.Name, c.Seconds, c.Calls = l["extension_point"], c.Seconds+h.Sum, c.Calls+h.Count
			points[c.Name] = c
		case pluginMetric:
			n := l["plugin"] + "/" + l["extension_point"]
			c := plugins[n]
			scale := 100.0 / PluginSamplePercent
			c.Name, c.Seconds, c.Calls = n, c.Seconds+h.Sum*scale, c.Calls+h.Count*scale
			plugins[n] = c
		}
	}
	return points, plugins
}

// Plan returns the phalanx gang plan histogram of the scrape.
func (s Scrape) Plan() Hist {
	var out Hist
	for key, h := range s {
		if name, _ := parseKey(key); name == planMetric {
			out.Sum += h.Sum
			out.Count += h.Count
			out.Buckets = addBuckets(out.Buckets, h.Buckets, 1)
		}
	}
	return out
}

// Attempts returns scheduling attempts by result (scheduled, unschedulable, error).
func (s Scrape) Attempts() map[string]float64 {
	out := map[string]float64{}
	for key, h := range s {
		if name, l := parseKey(key); name == attemptMetric {
			out[l["result"]] += h.Count
		}
	}
	return out
}

// Requests returns the scheduler's API requests by HTTP method.
func (s Scrape) Requests() map[string]float64 {
	out := map[string]float64{}
	for key, h := range s {
		if name, l := parseKey(key); name == requestsMetric {
			out[l["method"]] += h.Count
		}
	}
	return out
}

func (h Hist) String() string {
	if h.Count == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f ms × %.0f", h.Sum/h.Count*1000, h.Count)
}
