package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	clglobal "github.com/phalanx-sched/phalanx/internal/cli/global"
	"github.com/phalanx-sched/phalanx/internal/workload"
)

// ownerLabels are the labels operators put on their pods with the owning
// job's name, for pods whose direct owner is an intermediate object.
var ownerLabels = []string{
	"batch.kubernetes.io/job-name", "job-name",
	"jobset.sigs.k8s.io/jobset-name",
	"training.kubeflow.org/job-name",
	"trainer.kubeflow.org/trainjob-name",
	"ray.io/cluster",
	"leaderworkerset.sigs.k8s.io/name",
}

// Why is the why command's output.
type Why struct {
	Target string  `json:"target"`
	Gang   *JobRow `json:"gang,omitempty"`
	// WaitsFor is what the gang waits for, in the scheduler's words (the
	// blocking reason first), or the pod's own reason outside gangs.
	WaitsFor string `json:"waitsFor"`
	// Closest is where the gang comes nearest to fitting now, and what
	// must free there; ClosestNote says why it is not shown.
	Closest     *Closest    `json:"closest,omitempty"`
	ClosestNote string      `json:"closestNote,omitempty"`
	Members     []MemberRow `json:"members,omitempty"`
	Events      []EventRow  `json:"events,omitempty"`
}

// MemberRow is one pod of the gang.
type MemberRow struct {
	Name   string `json:"name"`
	Node   string `json:"node,omitempty"`
	Phase  string `json:"phase"`
	Reason string `json:"reason,omitempty"`
}

// EventRow is one recent event of the gang or its pods.
type EventRow struct {
	Age     string `json:"age"`
	Type    string `json:"type"`
	Object  string `json:"object"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

func why(ctx context.Context, c *clients, target string) (*Why, error) {
	ns := c.namespace
	if ns == "" {
		return nil, fmt.Errorf("why needs a namespace (-n), not -A")
	}
	kind, name, hasKind := strings.Cut(target, "/")
	if !hasKind {
		kind, name = "", target
	}
	kind = strings.ToLower(kind)
	rows, _, err := gangRows(ctx, c, ns)
	if err != nil {
		return nil, err
	}
	out := &Why{Target: ns + "/" + target}
	pod, err := whyTarget(ctx, c, ns, kind, name, rows, out)
	if err != nil {
		return nil, err
	}
	pods, err := c.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	if out.Gang == nil && pod == nil {
		// An owner: a pod it owns (directly or by the operator's label).
		for i := range pods.Items {
			if ownedBy(&pods.Items[i], kind, name) {
				pod = &pods.Items[i]
				break
			}
		}
	}
	if out.Gang == nil && pod != nil {
		podGang(out, pod, rows)
	}
	if out.Gang == nil && out.WaitsFor == "" {
		return nil, fmt.Errorf("no gang, pod or owner %q in namespace %s", target, ns)
	}
	objects := map[string]bool{}
	if g := out.Gang; g != nil {
		gangDetails(ctx, c, out, pods.Items, objects)
	} else if pod != nil {
		objects[pod.Name] = true
	}
	out.Events = recentEvents(ctx, c, ns, objects)
	return out, nil
}

// findGang is the gang row of that name (and kind, unless "").
func findGang(rows []JobRow, gangName, gangKind string) *JobRow {
	for i := range rows {
		if rows[i].Gang == gangName && (gangKind == "" || rows[i].Kind == gangKind) {
			return &rows[i]
		}
	}
	return nil
}

// whyTarget finds what kind/name names: a gang (out.Gang) or a pod. A bare
// name is a gang's first, then a pod's; neither is no error.
func whyTarget(ctx context.Context, c *clients, ns, kind, name string, rows []JobRow, out *Why) (*corev1.Pod, error) {
	switch {
	case kind == "podgroup" || kind == "gang" || kind == "podgroups" || kind == "pg":
		out.Gang = findGang(rows, name, "")
	case kind == "pod" || kind == "pods" || kind == "po":
		return c.kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	case kind == "":
		if out.Gang = findGang(rows, name, ""); out.Gang == nil {
			p, err := c.kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			switch {
			case err == nil:
				return p, nil
			case !apierrors.IsNotFound(err):
				return nil, err
			}
		}
	}
	return nil, nil
}

// podGang sets the gang of a pod, or says why it has none.
func podGang(out *Why, pod *corev1.Pod, rows []JobRow) {
	ref, err := workload.GangOf(pod)
	switch {
	case err != nil:
		out.WaitsFor = "the pod's gang annotations are invalid: " + err.Error()
	case ref.Source == workload.SourceNone:
		out.WaitsFor = "the pod is in no gang; " + podReason(pod)
		out.Members = []MemberRow{member(pod)}
	default:
		kind := "PodGroup"
		if ref.Source == workload.SourceWorkloadAPI {
			kind = "Workload"
		}
		if out.Gang = findGang(rows, ref.Name, kind); out.Gang == nil {
			out.WaitsFor = fmt.Sprintf("the pod names gang %s, whose group object does not exist (yet): the scheduler keeps its pods waiting until it does", ref.Name)
		}
	}
}

// gangDetails fills in what out.Gang waits for, its members and, while it
// waits, where it comes closest to fitting; objects gets the names whose
// events belong to it.
func gangDetails(ctx context.Context, c *clients, out *Why, pods []corev1.Pod, objects map[string]bool) {
	g := out.Gang
	objects[g.Gang] = true
	out.WaitsFor = waitsFor(g)
	for i := range pods {
		p := &pods[i]
		if ref, err := workload.GangOf(p); err == nil && ref.Name == g.Gang {
			out.Members = append(out.Members, member(p))
			objects[p.Name] = true
		}
	}
	if g.State != "Pending" && g.State != "Scheduling" {
		return
	}
	var waiting *corev1.Pod
	for i := range pods {
		p := &pods[i]
		if ref, err := workload.GangOf(p); err == nil && ref.Name == g.Gang && p.Spec.NodeName == "" && p.DeletionTimestamp == nil {
			waiting = p
			break
		}
	}
	if waiting != nil {
		cl, err := closest(ctx, c, waiting, g.required, int(g.Min-g.Bound))
		if err != nil {
			out.ClosestNote = "closest placement not shown: " + explain(err).Error()
		}
		out.Closest = cl
	}
}

// recentEvents are the ten latest events of the objects; none when events
// cannot be read.
func recentEvents(ctx context.Context, c *clients, ns string, objects map[string]bool) []EventRow {
	var out []EventRow
	for _, e := range clglobal.RecentEvents(ctx, c.kube, ns, "", func(e *corev1.Event) bool { return objects[e.InvolvedObject.Name] }) {
		out = append(out, EventRow{Age: time.Since(clglobal.EventTime(&e)).Round(time.Second).String(), Type: e.Type,
			Object: e.InvolvedObject.Kind + "/" + e.InvolvedObject.Name, Reason: e.Reason, Message: e.Message})
	}
	return out
}

func waitsFor(g *JobRow) string {
	switch g.State {
	case "Running":
		return fmt.Sprintf("nothing: the gang runs (%d of minimum %d members bound)", g.Bound, g.Min)
	case "Finished":
		return "nothing: the gang finished"
	}
	msg := g.Message
	if msg == "" {
		msg = "the scheduler has not tried it yet"
	}
	if g.Reason != "" && g.Reason != "Queued" {
		msg = g.Reason + ": " + msg
	}
	return msg
}

func ownedBy(p *corev1.Pod, kind, name string) bool {
	for _, o := range p.OwnerReferences {
		if o.Name == name && (kind == "" || strings.EqualFold(o.Kind, kind) || strings.EqualFold(o.Kind+"s", kind)) {
			return true
		}
	}
	for _, l := range ownerLabels {
		if p.Labels[l] == name {
			return true
		}
	}
	return false
}

func member(p *corev1.Pod) MemberRow {
	m := MemberRow{Name: p.Name, Node: p.Spec.NodeName, Phase: string(p.Status.Phase)}
	if p.Spec.NodeName == "" {
		m.Reason = podReason(p)
	}
	return m
}

// podReason is the pod's PodScheduled condition, or its scheduling gates.
func podReason(p *corev1.Pod) string {
	if len(p.Spec.SchedulingGates) > 0 {
		names := make([]string, 0, len(p.Spec.SchedulingGates))
		for _, g := range p.Spec.SchedulingGates {
			names = append(names, g.Name)
		}
		return "waits on scheduling gates " + strings.Join(names, ", ")
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return c.Reason + ": " + c.Message
		}
	}
	if p.Spec.NodeName == "" {
		return "not tried by the scheduler yet"
	}
	return ""
}

func (w *Why) table(out io.Writer) error {
	fmt.Fprintf(out, "Target:     %s\n", w.Target)
	if g := w.Gang; g != nil {
		fmt.Fprintf(out, "Gang:       %s %s/%s (source: %s)\n", g.Kind, g.Namespace, g.Gang, g.Source)
		fmt.Fprintf(out, "Members:    %d of minimum %d bound\n", g.Bound, g.Min)
		fmt.Fprintf(out, "State:      %s", g.State)
		if g.Waiting != "" {
			fmt.Fprintf(out, ", waiting %s", g.Waiting)
		}
		fmt.Fprintln(out)
		if q := g.Queue; q != "" {
			fmt.Fprintf(out, "Queue:      %s\n", q)
		}
		clglobal.PrintPosition(out, g.Position, "in the cluster", "a gang of another namespace")
	}
	fmt.Fprintf(out, "Waits for:  %s\n", w.WaitsFor)
	if w.Closest != nil {
		fmt.Fprintf(out, "Closest:    %s\n", w.Closest)
	}
	if w.ClosestNote != "" {
		fmt.Fprintf(out, "Note:       %s\n", w.ClosestNote)
	}
	if len(w.Members) > 0 {
		fmt.Fprintln(out, "Pods:")
		for _, m := range w.Members {
			line := fmt.Sprintf("  %s  %s", m.Name, m.Phase)
			if m.Node != "" {
				line += " on " + m.Node
			}
			if m.Reason != "" {
				line += "  " + m.Reason
			}
			fmt.Fprintln(out, line)
		}
	}
	if len(w.Events) > 0 {
		fmt.Fprintln(out, "Recent events:")
		for _, e := range w.Events {
			fmt.Fprintf(out, "  %s ago  %s  %s  %s: %s\n", e.Age, e.Type, e.Object, e.Reason, e.Message)
		}
	}
	return nil
}
