package gangs

import (
	"k8s.io/apimachinery/pkg/labels"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/gang/lifecycle"
	"github.com/phalanx-sched/phalanx/internal/queue"
)

// HoldsChanged implements lifecycle.HoldsListener: what the gang holds (or
// its reservation's expected start) changed, the annotations follow.
func (g *Gangs) HoldsChanged(ref ident.Ref) {
	g.Status.SetHeld(ref, g.Lifecycle.HeldOf(ref), g.Lifecycle.ExpectedStart(ref))
}

// clearStaleHeld, when this replica starts leading, removes the held and
// expected-start annotations from group objects whose gang holds nothing
// here (written by a replica that led before).
func (g *Gangs) clearStaleHeld() {
	holding := g.Lifecycle.HeldByGang()
	stale := func(ref ident.Ref, annotations map[string]string) {
		_, held := annotations[queue.HeldAnnotation]
		_, start := annotations[phalanxv1alpha1.ExpectedStartAnnotation]
		if held || start {
			if _, holds := holding[ref]; !holds {
				g.Status.ClearHeld(ref)
			}
		}
	}
	if g.PodGroups().Lister != nil {
		if pgs, err := g.PodGroups().Lister.List(labels.Everything()); err == nil {
			for _, pg := range pgs {
				stale(ident.Ref{Namespace: pg.Namespace, Name: pg.Name}, pg.Annotations)
			}
		}
	}
	if up := g.Upstream(); up != nil {
		if pgs, err := up.PodGroups.List(labels.Everything()); err == nil {
			for _, pg := range pgs {
				stale(ident.Ref{Source: ident.SourceWorkload, Namespace: pg.Namespace, Name: pg.Name}, pg.Annotations)
			}
		}
	}
}

var _ lifecycle.HoldsListener = (*Gangs)(nil)
