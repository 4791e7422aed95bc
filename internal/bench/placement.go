package bench

import (
	"context"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/phalanx-sched/phalanx/internal/testcluster"
)

// Placement is where a pass put the gangs of a workload with a required
// level: how many gangs span more than one domain of that level and, with
// sub-groups, how many sub-groups span more than one domain of theirs.
// Only phalanx (and upstream's plugin, for what it expresses) promises
// anything here; for stock it shows what the promise is worth.
type Placement struct {
	GangLevel, SubGroupLevel  string
	Gangs, SplitGangs         int
	SubGroups, SplitSubGroups int
	// MaxGangDomains and MaxSubGroupDomains are the most domains one gang
	// (one sub-group) spans.
	MaxGangDomains, MaxSubGroupDomains int
	// Unbound counts members without a node (none after a finished pass).
	Unbound int
}

// Whole reports whether every gang sits in one domain of its level and
// every sub-group in one of its own, with every member bound.
func (p Placement) Whole() bool { return p.SplitGangs == 0 && p.SplitSubGroups == 0 && p.Unbound == 0 }

// String is e.g. "gangs in one spine 1/1, sub-groups in one nvlink-clique 16/16".
func (p Placement) String() string {
	parts := []string{fmt.Sprintf("gangs in one %s %d/%d", p.GangLevel, p.Gangs-p.SplitGangs, p.Gangs)}
	if p.SplitGangs > 0 {
		parts[0] += fmt.Sprintf(" (a gang spans up to %d)", p.MaxGangDomains)
	}
	if p.SubGroups > 0 {
		s := fmt.Sprintf("sub-groups in one %s %d/%d", p.SubGroupLevel, p.SubGroups-p.SplitSubGroups, p.SubGroups)
		if p.SplitSubGroups > 0 {
			s += fmt.Sprintf(" (a sub-group spans up to %d)", p.MaxSubGroupDomains)
		}
		parts = append(parts, s)
	}
	if p.Unbound > 0 {
		parts = append(parts, fmt.Sprintf("%d members unbound", p.Unbound))
	}
	return strings.Join(parts, ", ")
}

// PlacementOf computes the placement of the workload's pods from the node
// each pod is bound to (pod index → node name, "" or absent: unbound);
// labels gives each node's labels. Sub-group k of a gang is ranks
// k×SubGroupSize … (k+1)×SubGroupSize−1.
func (w Workload) PlacementOf(nodeOf map[int]string, labels func(node string) map[string]string) Placement {
	p := Placement{GangLevel: w.RequiredLevel}
	subKey := ""
	groups := 0
	if w.SubGroupSize > 0 {
		p.SubGroupLevel = w.SubGroupLevel
		subKey = LevelLabel(w.SubGroupLevel)
		groups = w.GangSize / w.SubGroupSize
		p.SubGroups = w.Gangs * groups
	}
	for g := 0; g < w.NumGangs(); g++ {
		// A gang without a required level (in a mixed workload) counts
		// only its unbound members.
		gangKey, required := LevelLabel(w.RequiredOf(g)), w.RequiredOf(g) != "" || w.RequiredLevel == ""
		if required {
			p.Gangs++
		}
		gangDomains := map[string]bool{}
		subDomains := make([]map[string]bool, groups)
		for k := range subDomains {
			subDomains[k] = map[string]bool{}
		}
		for r := 0; r < w.SizeOf(g); r++ {
			node := nodeOf[w.firstOf(g)+r]
			if node == "" {
				p.Unbound++
				continue
			}
			if !required {
				continue
			}
			l := labels(node)
			gangDomains[l[gangKey]] = true
			if groups > 0 {
				subDomains[r/w.SubGroupSize][l[subKey]] = true
			}
		}
		if len(gangDomains) > 1 {
			p.SplitGangs++
		}
		p.MaxGangDomains = max(p.MaxGangDomains, len(gangDomains))
		for _, d := range subDomains {
			if len(d) > 1 {
				p.SplitSubGroups++
			}
			p.MaxSubGroupDomains = max(p.MaxSubGroupDomains, len(d))
		}
	}
	return p
}

// CheckPlacement lists the pass's pods and computes their placement; the
// nodes' labels are the workload's own (Node).
func CheckPlacement(ctx context.Context, c *testcluster.Cluster, w Workload, ns string) (*Placement, error) {
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	index := make(map[string]int, w.Total())
	for i := 0; i < w.Total(); i++ {
		index[w.PodName(i)] = i
	}
	nodeOf := map[int]string{}
	for _, p := range pods.Items {
		if i, ok := index[p.Name]; ok {
			nodeOf[i] = p.Spec.NodeName
		}
	}
	labels := make(map[string]map[string]string, w.Nodes)
	for i := 0; i < w.Nodes; i++ {
		n := w.Node(i)
		labels[n.Name] = n.Labels
	}
	p := w.PlacementOf(nodeOf, func(node string) map[string]string { return labels[node] })
	return &p, nil
}
