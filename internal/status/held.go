package status

import (
	"context"
	"encoding/json"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/queue"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// The held annotation (queue.HeldAnnotation) publishes on each gang's group
// object what its plan or reservation holds on nodes, so that the controller,
// which sees only the API, counts in Queue.status what the scheduler's queue
// snapshot counts (queue.ChargeHeld); beside it, the expected-start
// annotation says when a reserving gang expects to start, for
// QueuePositions. The Writer writes both as it writes conditions:
// asynchronously, collapsed, in one patch, and only while leading.

// defaultHeldDelay collapses the hold changes of a burst (a large gang's
// members reserved one by one) into one patch.
const defaultHeldDelay = 500 * time.Millisecond

// published are the annotations' values ("": absent).
type published struct {
	held  string // queue.EncodeHeld
	start string // RFC 3339
}

// heldAnnotation is what a gang's group object should carry.
type heldAnnotation struct {
	want published // zero to remove both annotations
	// written: want is on the object (as far as this replica knows).
	written bool
	// onObject: the object may carry an annotation (one was written, or
	// another replica's was found); a hold that ends before it is ever
	// written costs no patch.
	onObject bool
}

// SetHeld records what a gang holds (nil: nothing) and when it is expected
// to start (zero: unknown); the annotations are patched after HeldDelay,
// once for all the changes made meanwhile.
func (w *Writer) SetHeld(ref ident.Ref, l resources.List, start time.Time) {
	want := published{held: queue.EncodeHeld(l)}
	if !start.IsZero() {
		want.start = start.UTC().Format(time.RFC3339)
	}
	w.mu.Lock()
	h, had := w.held[ref]
	switch {
	case had && h.want == want:
		w.mu.Unlock()
		return
	case had && want == (published{}) && !h.onObject:
		delete(w.held, ref)
		w.mu.Unlock()
		return
	case !had && want == (published{}):
		// Nothing said, nothing to take back.
		w.mu.Unlock()
		return
	case !had:
		h = &heldAnnotation{}
		w.held[ref] = h
	}
	h.want, h.written = want, false
	w.mu.Unlock()
	w.queue.AddAfter(ref, w.HeldDelay)
}

// ClearHeld removes the annotation from a group object that carries it while
// this replica knows of no hold (another replica wrote it).
func (w *Writer) ClearHeld(ref ident.Ref) {
	w.mu.Lock()
	if _, had := w.held[ref]; had {
		w.mu.Unlock()
		return
	}
	w.held[ref] = &heldAnnotation{onObject: true}
	w.mu.Unlock()
	w.queue.Add(ref)
}

// heldDueLocked returns the annotation to write, if it is not written yet.
// From here the write may land: a hold that ends meanwhile must patch the
// annotation away, not forget it.
func (w *Writer) heldDueLocked(ref ident.Ref) (published, bool) {
	h, ok := w.held[ref]
	if !ok || h.written {
		return published{}, false
	}
	if h.want != (published{}) {
		h.onObject = true
	}
	return h.want, true
}

// heldWritten records that want is on the object; an empty one is forgotten.
func (w *Writer) heldWritten(ref ident.Ref, want published) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if h, ok := w.held[ref]; ok && h.want == want {
		if want == (published{}) {
			delete(w.held, ref)
		} else {
			h.written, h.onObject = true, true
		}
	}
}

// patchHeld sets (or, where want's value is "", removes) the held and
// expected-start annotations with a merge patch of the group object's
// metadata.
func (w *Writer) patchHeld(ctx context.Context, ref ident.Ref, want published) error {
	value := func(v string) any {
		if v == "" {
			return nil
		}
		return v
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"annotations": map[string]any{queue.HeldAnnotation: value(want.held), phalanxv1alpha1.ExpectedStartAnnotation: value(want.start)}}})
	if err != nil {
		return err
	}
	switch ref.Source {
	case ident.SourceWorkload:
		_, err = w.client.SchedulingV1beta1().PodGroups(ref.Namespace).Patch(ctx, ref.Name, types.MergePatchType, body, metav1.PatchOptions{})
	case ident.SourceComposite:
		_, err = w.client.SchedulingV1alpha3().CompositePodGroups(ref.Namespace).Patch(ctx, ref.Name, types.MergePatchType, body, metav1.PatchOptions{})
	default:
		_, err = w.pgClient.SchedulingV1alpha1().PodGroups(ref.Namespace).Patch(ctx, ref.Name, types.MergePatchType, body, metav1.PatchOptions{})
	}
	return err
}
