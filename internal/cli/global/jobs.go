// Package global is kubectl phalanx pointed at a Karmada control plane:
// the ResourceBindings phalanx-global decides, each with its global queue,
// its position there, the member it went to or why it waits. It reads only
// the namespace's resourcebindings, queuepositions and events, with the
// user's own RBAC; bindings are read as the tier reads them
// (internal/global/plane).
package global

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"sort"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/global/plane"
	"github.com/phalanx-sched/phalanx/internal/served"
)

// OnPlane reports whether cfg's API server is a Karmada control plane: it
// serves work.karmada.io/v1alpha2 resourcebindings.
func OnPlane(cfg *rest.Config) (bool, error) {
	return served.Resource(cfg, plane.ResourceBindings.GroupVersion().String(), plane.ResourceBindings.Resource)
}

// States of a binding.
const (
	Waiting    = "Waiting"
	Dispatched = "Dispatched"
	Running    = "Running"
	Done       = "Done"
)

// Row is one binding of the tier.
type Row struct {
	Namespace string `json:"namespace"`
	// Binding is the ResourceBinding's name; Kind and Name its template's.
	Binding string `json:"binding"`
	Kind    string `json:"kind"`
	Name    string `json:"name"`
	Queue   string `json:"queue,omitempty"`
	// Member it was dispatched to, "" while it waits.
	Member string `json:"member,omitempty"`
	// State: Waiting, Dispatched (not started in its member yet),
	// Running, Done.
	State   string `json:"state"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Position while it waits (the tier's QueuePositions on the plane).
	Position *phalanxv1alpha1.GangPosition `json:"position,omitempty"`
	created  time.Time
}

// List is the jobs command's output on a Karmada plane.
type List struct {
	Jobs []Row `json:"jobs"`
	// Note says what could not be read, if anything.
	Note string `json:"note,omitempty"`
}

// StateOf is a binding's state, from where it went and its aggregated
// status as the tier reads it.
func StateOf(v *plane.View) string {
	switch {
	case v.Member == "":
		return Waiting
	case v.Done:
		return Done
	case v.Started:
		return Running
	}
	return Dispatched
}

// Jobs lists the bindings of schedulerName in namespace ns ("" for all),
// those of queue q only unless q is "". A QueuePositions that cannot be
// read is a note, not an error.
func Jobs(ctx context.Context, client dynamic.Interface, ns, q, schedulerName string, explain func(error) error) (*List, error) {
	rows, note, err := rowsOf(ctx, client, ns, schedulerName, explain)
	if err != nil {
		return nil, err
	}
	out := &List{Jobs: []Row{}, Note: note}
	for _, r := range rows {
		if q == "" || r.Queue == q {
			out.Jobs = append(out.Jobs, r)
		}
	}
	return out, nil
}

func rowsOf(ctx context.Context, client dynamic.Interface, ns, schedulerName string, explain func(error) error) ([]Row, string, error) {
	list, err := client.Resource(plane.ResourceBindings).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, "", err
	}
	type key struct{ ns, name string }
	positions := map[key]*phalanxv1alpha1.GangPosition{}
	var note string
	if qps, err := client.Resource(plane.QueuePositionsResource).Namespace(ns).List(ctx, metav1.ListOptions{}); err != nil {
		note = "positions not shown: " + explain(err).Error()
	} else {
		for _, u := range qps.Items {
			var qp phalanxv1alpha1.QueuePositions
			if err := fromUnstructured(u.Object, &qp); err != nil || qp.Name != phalanxv1alpha1.QueuePositionsName {
				continue
			}
			for i := range qp.Gangs {
				if g := &qp.Gangs[i]; g.Kind == plane.BindingKind {
					positions[key{qp.Namespace, g.Name}] = g
				}
			}
		}
	}
	var rows []Row
	for i := range list.Items {
		v, err := plane.ViewOf(&list.Items[i])
		if err != nil {
			return nil, "", fmt.Errorf("reading ResourceBinding %s/%s: %w", list.Items[i].GetNamespace(), list.Items[i].GetName(), err)
		}
		if v.SchedulerName != schedulerName {
			continue
		}
		r := Row{Namespace: v.Namespace, Binding: v.Name, Kind: v.Kind, Name: v.Template, Queue: v.Queue, Member: v.Member,
			State: StateOf(v), created: v.Created}
		if c := v.Scheduled; c != nil {
			r.Reason, r.Message = c.Reason, c.Message
		}
		if r.State == Waiting {
			if p := positions[key{v.Namespace, v.Name}]; p != nil {
				r.Position, r.Queue = p, p.Queue
			}
		}
		rows = append(rows, r)
	}
	ByPosition(rows, func(r Row) (*phalanxv1alpha1.GangPosition, time.Time) { return r.Position, r.created })
	return rows, note, nil
}

// Table prints the list as the jobs table does for gangs.
func (l *List) Table(w io.Writer) error {
	if len(l.Jobs) == 0 {
		fmt.Fprintln(w, "No bindings of phalanx-global.")
	} else {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAMESPACE\tNAME\tQUEUE\tPOSITION\tMEMBER\tSTATE\tWHY")
		for _, j := range l.Jobs {
			fmt.Fprintf(tw, "%s\t%s/%s\t%s\t%s\t%s\t%s\t%s\n", j.Namespace, j.Kind, j.Name, dash(j.Queue), position(j.Position), dash(j.Member), j.State, FirstClause(j.Reason, j.Message))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if l.Note != "" {
		fmt.Fprintln(w, "Note:", l.Note)
	}
	return nil
}

// ByPosition sorts rows that wait with a position first, in their order
// across queues, then the others by creation time; kubectl phalanx sorts
// gangs and bindings alike.
func ByPosition[T any](rows []T, key func(T) (*phalanxv1alpha1.GangPosition, time.Time)) {
	sort.SliceStable(rows, func(i, j int) bool {
		pa, ca := key(rows[i])
		pb, cb := key(rows[j])
		switch {
		case pa != nil && pb != nil:
			return pa.PositionInCluster < pb.PositionInCluster
		case (pa != nil) != (pb != nil):
			return pa != nil
		}
		return ca.Before(cb)
	})
}

// PrintPosition writes why's Position and Ahead lines; where is "in the
// cluster" or "on the plane", another what the one ahead is when it is of
// another namespace.
func PrintPosition(out io.Writer, p *phalanxv1alpha1.GangPosition, where, another string) {
	if p == nil {
		return
	}
	fmt.Fprintf(out, "Position:   %d of %d in queue %s, %d %s\n", p.PositionInQueue, p.QueueLength, p.Queue, p.PositionInCluster, where)
	if p.ExpectedStart != nil {
		fmt.Fprintf(out, "Expected:   to start by %s (the reservation's room frees then, by the limits and estimates of the pods in it)\n", p.ExpectedStart.UTC().Format(time.RFC3339))
	}
	if a := p.Ahead; a != nil {
		who := another
		if a.Name != "" {
			who = a.Name
		}
		fmt.Fprintf(out, "Ahead:      %s, because of %s\n", who, a.Reason)
	}
}

func position(p *phalanxv1alpha1.GangPosition) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("%d/%d in %s (#%d on the plane)", p.PositionInQueue, p.QueueLength, p.Queue, p.PositionInCluster)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// FirstClause is the reason and the first clause of the tier's message:
// the blocking reason comes first, the members' answers follow after "; "
// and the position (a column of its own) ends it.
func FirstClause(reason, message string) string {
	message = positionSuffix.ReplaceAllString(message, "")
	if message == "" {
		return dash(reason)
	}
	message = message[:clauseEnd(message)]
	if len(message) > 100 {
		message = message[:97] + "..."
	}
	return reason + ": " + message
}

// clauseEnd is where the message's first clause ends: the first "; " or
// ". " outside parentheses (a member's answer may hold either).
func clauseEnd(message string) int {
	depth := 0
	for i := 0; i < len(message); i++ {
		switch c := message[i]; {
		case c == '(':
			depth++
		case c == ')' && depth > 0:
			depth--
		case depth == 0 && i > 0 && (c == ';' || c == '.') && i+1 < len(message) && message[i+1] == ' ':
			return i
		}
	}
	return len(message)
}

// positionSuffix is what the tier appends to a waiting job's message.
var positionSuffix = regexp.MustCompile(` \(position \d+ in queue [^)]*\)$`)
