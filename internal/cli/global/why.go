package global

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/phalanx-sched/phalanx/internal/global/plane"
)

// Why is the why command's output on a Karmada plane.
type Why struct {
	Target  string `json:"target"`
	Binding *Row   `json:"binding"`
	// WaitsFor is the Scheduled condition's reason and whole message.
	WaitsFor string `json:"waitsFor"`
	// Events are the binding's recent events (none when they cannot be
	// read).
	Events []Event `json:"events,omitempty"`
	Note   string  `json:"note,omitempty"`
}

// Event is one recent event of the binding.
type Event struct {
	Age     string `json:"age"`
	Type    string `json:"type"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// Explain finds the binding target names in namespace ns: the binding's
// name, its template's name, or either as KIND/NAME (resourcebinding/NAME,
// rb/NAME, or the template's kind: job/NAME, pytorchjob/NAME ...).
func Explain(ctx context.Context, client Clients, ns, target, schedulerName string, explain func(error) error) (*Why, error) {
	if ns == "" {
		return nil, fmt.Errorf("why needs a namespace (-n), not -A")
	}
	rows, note, err := rowsOf(ctx, client.Dynamic, ns, schedulerName, explain)
	if err != nil {
		return nil, err
	}
	r := find(rows, target)
	if r == nil {
		return nil, fmt.Errorf("no ResourceBinding of %s named %q, and none for a template of that name, in namespace %s", schedulerName, target, ns)
	}
	out := &Why{Target: ns + "/" + target, Binding: r, Note: note, WaitsFor: waitsFor(r)}
	out.Events = events(ctx, client.Kube, ns, r.Binding)
	return out, nil
}

// Clients are what Explain reads with.
type Clients struct {
	Dynamic dynamic.Interface
	Kube    kubernetes.Interface
}

func find(rows []Row, target string) *Row {
	kind, name, hasKind := strings.Cut(target, "/")
	if !hasKind {
		kind, name = "", target
	}
	kind = strings.ToLower(kind)
	binding := kind == "resourcebinding" || kind == "resourcebindings" || kind == "rb"
	// A binding's own name first, then a template's.
	for i := range rows {
		if r := &rows[i]; (kind == "" || binding) && r.Binding == name {
			return r
		}
	}
	for i := range rows {
		if r := &rows[i]; !binding && r.Name == name && (kind == "" || kind == strings.ToLower(r.Kind) || kind == strings.ToLower(r.Kind)+"s") {
			return r
		}
	}
	return nil
}

func waitsFor(r *Row) string {
	switch r.State {
	case Running:
		return "nothing: it runs in member " + r.Member
	case Done:
		return "nothing: it finished in member " + r.Member
	case Dispatched:
		return "nothing on the plane: dispatched whole to member " + r.Member + ", not started there yet (kubectl phalanx why there says why)"
	}
	if r.Reason == "" {
		return "phalanx-global has not decided it yet"
	}
	return r.Reason + ": " + r.Message
}

// events are the ten latest events of the binding.
func events(ctx context.Context, kube kubernetes.Interface, ns, name string) []Event {
	var out []Event
	for _, e := range RecentEvents(ctx, kube, ns, "involvedObject.name="+name, func(e *corev1.Event) bool { return e.InvolvedObject.Kind == plane.BindingKind }) {
		out = append(out, Event{Age: time.Since(EventTime(&e)).Round(time.Second).String(), Type: e.Type, Reason: e.Reason, Message: e.Message})
	}
	return out
}

// RecentEvents are the ten latest events of namespace ns (of fieldSelector)
// that keep accepts, newest first; none when events cannot be read.
func RecentEvents(ctx context.Context, kube kubernetes.Interface, ns, fieldSelector string, keep func(*corev1.Event) bool) []corev1.Event {
	list, err := kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fieldSelector})
	if err != nil {
		return nil
	}
	var out []corev1.Event
	for i := range list.Items {
		if keep(&list.Items[i]) {
			out = append(out, list.Items[i])
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return EventTime(&out[i]).After(EventTime(&out[j])) })
	if len(out) > 10 {
		out = out[:10]
	}
	return out
}

// EventTime is when an event last happened.
func EventTime(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

// Table prints the binding, its position and what it waits for.
func (w *Why) Table(out io.Writer) error {
	r := w.Binding
	fmt.Fprintf(out, "Target:     %s\n", w.Target)
	fmt.Fprintf(out, "Binding:    ResourceBinding %s/%s (template %s %s)\n", r.Namespace, r.Binding, r.Kind, r.Name)
	fmt.Fprintf(out, "State:      %s\n", r.State)
	fmt.Fprintf(out, "Queue:      %s\n", dash(r.Queue))
	fmt.Fprintf(out, "Member:     %s\n", dash(r.Member))
	PrintPosition(out, r.Position, "on the plane", "a binding of another namespace")
	fmt.Fprintf(out, "Waits for:  %s\n", w.WaitsFor)
	if w.Note != "" {
		fmt.Fprintf(out, "Note:       %s\n", w.Note)
	}
	if len(w.Events) > 0 {
		fmt.Fprintln(out, "Recent events:")
		for _, e := range w.Events {
			fmt.Fprintf(out, "  %s ago  %s  %s: %s\n", e.Age, e.Type, e.Reason, e.Message)
		}
	}
	return nil
}

func fromUnstructured(obj map[string]any, into any) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructured(obj, into)
}
