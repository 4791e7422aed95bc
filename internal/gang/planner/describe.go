package planner

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// DescribeFailure says why no placement exists, in terms users can act on:
// how many members fit, in which domains, and which filters rejected nodes.
// verdicts align with nodeNames; req is the request the planner saw.
func DescribeFailure(diag *Diagnosis, placed, minMember int, constraint string, req Request, nodeNames []string, verdicts []Verdict) string {
	failed := make(map[string]Verdict, len(verdicts))
	for i, v := range verdicts {
		if !v.Fits {
			failed[nodeNames[i]] = v
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "no placement for %d more members (minMember %d, %d placed)", diag.Needed, minMember, placed)
	if constraint != "" {
		fmt.Fprintf(&b, " with topology %s", constraint)
	}
	fmt.Fprintf(&b, ": at most %d fit", diag.Placed)
	if diag.Best.Level != "" {
		fmt.Fprintf(&b, " in %s %s", diag.Best.Level, diag.Best.Value)
	}
	if sg := DescribeSubGroups(diag); sg != "" {
		b.WriteString("; " + sg)
	}
	if diag.UnknownLevel != "" {
		levels := "none defined"
		if len(req.Levels) > 0 {
			levels = strings.Join(req.Levels, ", ")
		}
		fmt.Fprintf(&b, "; topology level %q is not defined (levels: %s)", diag.UnknownLevel, levels)
	}
	if len(diag.Tried) > 0 {
		li := slices.Index(req.Levels, diag.Tried[0].Domain.Level)
		b.WriteString("; tried")
		for i, d := range diag.Tried {
			if i == 4 {
				fmt.Fprintf(&b, ", and %d more", len(diag.Tried)-i)
				break
			}
			total, filteredOut := 0, map[string]int{}
			for _, n := range req.Nodes {
				if li >= 0 && li < len(n.Domains) && n.Domains[li] == d.Domain.Value {
					total++
					if v, ok := failed[n.Name]; ok {
						filteredOut[v.Plugin]++
					}
				}
			}
			sep := ","
			if i == 0 {
				sep = ""
			}
			fmt.Fprintf(&b, "%s %s (room for %d", sep, d.Domain.Value, d.Placed)
			for _, plugin := range sortedKeys(filteredOut) {
				fmt.Fprintf(&b, "; %d of %d nodes fail %s", filteredOut[plugin], total, plugin)
			}
			b.WriteString(")")
		}
	}
	byReason := map[string]int{}
	for _, v := range failed {
		byReason[v.Plugin+": "+strings.Join(v.Reasons, ", ")]++
	}
	fmt.Fprintf(&b, "; %d of %d nodes fail filters", len(failed), len(nodeNames))
	reasons := sortedKeys(byReason)
	sort.SliceStable(reasons, func(i, j int) bool { return byReason[reasons[i]] > byReason[reasons[j]] })
	for i, r := range reasons {
		if i == 3 {
			b.WriteString("; …")
			break
		}
		fmt.Fprintf(&b, "; %d × %s", byReason[r], r)
	}
	return b.String()
}

func sortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
