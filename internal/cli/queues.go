package cli

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

// QueueRow is one queue of the tree.
type QueueRow struct {
	Name        string `json:"name"`
	Parent      string `json:"parent,omitempty"`
	Depth       int    `json:"depth"`
	Weight      int32  `json:"weight"`
	State       string `json:"state"`
	Reclaimable bool   `json:"reclaimable"`
	// Valid is empty for a queue the scheduler uses, else why it ignores it.
	Invalid    string            `json:"invalid,omitempty"`
	Guarantee  map[string]string `json:"guarantee,omitempty"`
	Capability map[string]string `json:"capability,omitempty"`
	Deserved   map[string]string `json:"deserved,omitempty"`
	// Allocated counts bound pods and what plans and reservations hold.
	Allocated map[string]string `json:"allocated,omitempty"`
	// Borrowing is what the queue uses above its guarantee.
	Borrowing map[string]string `json:"borrowing,omitempty"`
	// RecentUsage is the allocation averaged over the decayed fair share's
	// half-life (empty while it is off).
	RecentUsage map[string]string `json:"recentUsage,omitempty"`
	Pending     int32             `json:"pendingGangs"`
	Running     int32             `json:"runningGangs"`
}

// QueueTree is the queues command's output.
type QueueTree struct {
	Queues []QueueRow `json:"queues"`
}

func queues(ctx context.Context, c *clients) (*QueueTree, error) {
	list, err := c.phalanx.SchedulingV1alpha1().Queues().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	children := map[string][]*phalanxv1alpha1.Queue{}
	names := map[string]bool{}
	for i := range list.Items {
		names[list.Items[i].Name] = true
	}
	for i := range list.Items {
		q := &list.Items[i]
		parent := q.Spec.Parent
		if !names[parent] {
			parent = ""
		}
		children[parent] = append(children[parent], q)
	}
	out := &QueueTree{Queues: []QueueRow{}}
	var walk func(parent string, depth int)
	walk = func(parent string, depth int) {
		kids := children[parent]
		sort.Slice(kids, func(i, j int) bool { return kids[i].Name < kids[j].Name })
		for _, q := range kids {
			row := QueueRow{
				Name: q.Name, Parent: q.Spec.Parent, Depth: depth, Weight: max(q.Spec.Weight, 1),
				State: string(q.Spec.State), Reclaimable: q.Spec.Reclaimable == nil || *q.Spec.Reclaimable,
				Guarantee: quantities(q.Spec.Guarantee), Capability: quantities(q.Spec.Capability),
				Deserved: quantities(q.Status.Deserved), Allocated: quantities(q.Status.Allocated),
				Borrowing:   above(q.Status.Allocated, q.Spec.Guarantee),
				RecentUsage: quantities(q.Status.RecentUsage),
				Pending:     q.Status.PendingGangs, Running: q.Status.RunningGangs,
			}
			if row.State == "" {
				row.State = string(phalanxv1alpha1.QueueStateOpen)
			}
			if cond := meta.FindStatusCondition(q.Status.Conditions, "Valid"); cond != nil && cond.Status == metav1.ConditionFalse {
				row.Invalid = cond.Message
			}
			out.Queues = append(out.Queues, row)
			walk(q.Name, depth+1)
		}
	}
	walk("", 0)
	return out, nil
}

func (t *QueueTree) table(w io.Writer) error {
	if len(t.Queues) == 0 {
		_, err := fmt.Fprintln(w, "No queues: every pod is in queue \"default\" with the whole cluster.")
		return err
	}
	// RECENT only where decayed fair share is on (some queue has a
	// recent usage).
	recent := false
	for _, q := range t.Queues {
		recent = recent || len(q.RecentUsage) > 0
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	header := "QUEUE\tWEIGHT\tSTATE\tRUNNING\tPENDING\tALLOCATED/DESERVED\tGUARANTEE\tCAPABILITY\tBORROWING"
	if recent {
		header += "\tRECENT"
	}
	fmt.Fprintln(tw, header)
	for _, q := range t.Queues {
		state := q.State
		if q.Invalid != "" {
			state = "Invalid: " + q.Invalid
		}
		fmt.Fprintf(tw, "%s%s\t%d\t%s\t%d\t%d\t%s\t%s\t%s\t%s", strings.Repeat("  ", q.Depth), q.Name, q.Weight, state,
			q.Running, q.Pending, ofDeserved(q.Allocated, q.Deserved), list(q.Guarantee), list(q.Capability), list(q.Borrowing))
		if recent {
			fmt.Fprintf(tw, "\t%s", list(q.RecentUsage))
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// resourceOrder puts GPUs (and other accelerators and devices) first, then
// cpu and memory, then the rest.
func resourceOrder(names []string) {
	rank := func(n string) int {
		switch {
		case strings.Contains(n, "gpu"):
			return 0
		case strings.Contains(n, "/") && !strings.HasPrefix(n, "hugepages-"):
			return 1
		case n == "cpu":
			return 2
		case n == "memory":
			return 3
		}
		return 4
	}
	sort.Slice(names, func(i, j int) bool {
		if ri, rj := rank(names[i]), rank(names[j]); ri != rj {
			return ri < rj
		}
		return names[i] < names[j]
	})
}

func quantities(l corev1.ResourceList) map[string]string {
	if len(l) == 0 {
		return nil
	}
	out := map[string]string{}
	for n, q := range l {
		out[string(n)] = q.String()
	}
	return out
}

// above is what used holds above limit, per resource (nothing for a
// queue without a guarantee of that resource and no use).
func above(used, limit corev1.ResourceList) map[string]string {
	out := map[string]string{}
	for n, u := range used {
		l := limit[n]
		if u.Cmp(l) > 0 {
			d := u.DeepCopy()
			d.Sub(l)
			out[string(n)] = d.String()
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	resourceOrder(out)
	return out
}

func list(m map[string]string) string {
	if len(m) == 0 {
		return "-"
	}
	parts := make([]string, 0, len(m))
	for _, k := range sortedKeys(m) {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, ",")
}

func ofDeserved(alloc, deserved map[string]string) string {
	keys := map[string]string{}
	for k := range alloc {
		keys[k] = ""
	}
	for k := range deserved {
		keys[k] = ""
	}
	if len(keys) == 0 {
		return "-"
	}
	parts := []string{}
	for _, k := range sortedKeys(keys) {
		a, d := alloc[k], deserved[k]
		if a == "" {
			a = "0"
		}
		if d == "" {
			d = "0"
		}
		if a == "0" && d == "0" {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s=%s/%s", k, a, d))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ",")
}
