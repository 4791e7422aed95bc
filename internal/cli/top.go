package cli

import (
	"context"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

// DomainRow is one topology domain's capacity of a resource.
type DomainRow struct {
	Level  string `json:"level"`
	Domain string `json:"domain"`
	Nodes  int    `json:"nodes"`
	// Allocatable, Used and Free count the resource on the domain's
	// schedulable nodes; LargestOnNode is the most free on one node, and
	// FreeNodes counts nodes with none of it in use.
	Allocatable   int64 `json:"allocatable"`
	Used          int64 `json:"used"`
	Free          int64 `json:"free"`
	LargestOnNode int64 `json:"largestOnNode"`
	FreeNodes     int   `json:"freeNodes"`
}

// Top is the top command's output.
type Top struct {
	Resource string      `json:"resource"`
	Domains  []DomainRow `json:"domains"`
	Note     string      `json:"note,omitempty"`
}

func top(ctx context.Context, c *clients, res string) (*Top, error) {
	name := corev1.ResourceName(res)
	out := &Top{Resource: res, Domains: []DomainRow{}}
	levels := []phalanxv1alpha1.TopologyLevel{}
	nt, err := c.phalanx.SchedulingV1alpha1().NetworkTopologies().Get(ctx, "default", metav1.GetOptions{})
	switch {
	case err == nil:
		levels = nt.Spec.Levels
	case apierrors.IsNotFound(err):
		out.Note = "no NetworkTopology \"default\": showing hosts only"
	default:
		out.Note = "NetworkTopology not read (" + explain(err).Error() + "): showing hosts only"
	}
	if len(levels) == 0 || levels[len(levels)-1].NodeLabel != corev1.LabelHostname {
		levels = append(levels, phalanxv1alpha1.TopologyLevel{Name: "host", NodeLabel: corev1.LabelHostname})
	}
	nodes, used, err := nodeUsage(ctx, c)
	if err != nil {
		return nil, err
	}
	type nodeFree struct{ alloc, used int64 }
	perNode := map[string]nodeFree{}
	for _, n := range nodes {
		q, ok := n.Status.Allocatable[name]
		if !ok || n.Spec.Unschedulable {
			continue
		}
		u := used[n.Name][name]
		perNode[n.Name] = nodeFree{q.Value(), u.Value()}
	}
	for _, l := range levels {
		byDomain := map[string]*DomainRow{}
		for _, n := range nodes {
			nf, ok := perNode[n.Name]
			if !ok {
				continue
			}
			v := n.Labels[l.NodeLabel]
			if l.NodeLabel == corev1.LabelHostname && v == "" {
				v = n.Name
			}
			if v == "" {
				v = "(unlabelled)"
			}
			d := byDomain[v]
			if d == nil {
				d = &DomainRow{Level: l.Name, Domain: v}
				byDomain[v] = d
			}
			free := max(nf.alloc-nf.used, 0)
			d.Nodes++
			d.Allocatable += nf.alloc
			d.Used += nf.used
			d.Free += free
			d.LargestOnNode = max(d.LargestOnNode, free)
			if nf.used == 0 {
				d.FreeNodes++
			}
		}
		rows := make([]DomainRow, 0, len(byDomain))
		for _, d := range byDomain {
			rows = append(rows, *d)
		}
		sort.Slice(rows, func(i, j int) bool {
			if rows[i].Free != rows[j].Free {
				return rows[i].Free > rows[j].Free
			}
			return rows[i].Domain < rows[j].Domain
		})
		out.Domains = append(out.Domains, rows...)
	}
	return out, nil
}

func (t *Top) table(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "LEVEL\tDOMAIN\tNODES\tFREE %s\tUSED\tALLOCATABLE\tMOST FREE ON ONE NODE\tIDLE NODES\n", t.Resource)
	for _, d := range t.Domains {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\n", d.Level, d.Domain, d.Nodes, d.Free, d.Used, d.Allocatable, d.LargestOnNode, d.FreeNodes)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if t.Note != "" {
		fmt.Fprintln(w, "Note:", t.Note)
	}
	return nil
}
