package status

import (
	"context"
	"encoding/json"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/queue"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

// The held annotation (queue.HeldAnnotation) publishes on each gang's group
// object what its plan or reservation holds on nodes, so that the controller,
// which sees only the API, counts in Queue.status what the scheduler's queue
// snapshot counts (queue.ChargeHeld). The Writer writes it as it writes
// conditions: asynchronously, collapsed, and only while leading.

// defaultHeldDelay collapses the hold changes of a burst (a large gang's
// members reserved one by one) into one patch.
const defaultHeldDelay = 500 * time.Millisecond

// heldAnnotation is the annotation a gang's group object should carry.
type heldAnnotation struct {
	want string // queue.EncodeHeld; "" to remove the annotation
	// written: want is on the object (as far as this replica knows).
	written bool
	// onObject: the object may carry an annotation (one was written, or
	// another replica's was found); a hold that ends before it is ever
	// written costs no patch.
	onObject bool
}

// SetHeld records what a gang holds (nil: nothing); the annotation is
// patched after HeldDelay, once for all the changes made meanwhile.
func (w *Writer) SetHeld(ref ident.Ref, l resources.List) {
	want := queue.EncodeHeld(l)
	w.mu.Lock()
	h, had := w.held[ref]
	switch {
	case had && h.want == want:
		w.mu.Unlock()
		return
	case had && want == "" && !h.onObject:
		delete(w.held, ref)
		w.mu.Unlock()
		return
	case !had && want == "":
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
func (w *Writer) heldDueLocked(ref ident.Ref) (string, bool) {
	h, ok := w.held[ref]
	if !ok || h.written {
		return "", false
	}
	if h.want != "" {
		h.onObject = true
	}
	return h.want, true
}

// heldWritten records that want is on the object; an empty one is forgotten.
func (w *Writer) heldWritten(ref ident.Ref, want string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if h, ok := w.held[ref]; ok && h.want == want {
		if want == "" {
			delete(w.held, ref)
		} else {
			h.written, h.onObject = true, true
		}
	}
}

// patchHeld sets (or, when want is "", removes) the held annotation with a
// merge patch of the group object's metadata.
func (w *Writer) patchHeld(ctx context.Context, ref ident.Ref, want string) error {
	var value any
	if want != "" {
		value = want
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"annotations": map[string]any{queue.HeldAnnotation: value}}})
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
