package gangs

import (
	"k8s.io/apimachinery/pkg/labels"

	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/gang/lifecycle"
	"github.com/phalanx-sched/phalanx/internal/queue"
)

// HoldsChanged implements lifecycle.HoldsListener: what the gang holds changed,
// the annotation follows.
func (g *Gangs) HoldsChanged(ref ident.Ref) {
	g.Status.SetHeld(ref, g.Lifecycle.HeldOf(ref))
}

// clearStaleHeld, when this replica starts leading, removes the held
// annotation from group objects whose gang holds nothing here (written by a
// replica that led before).
func (g *Gangs) clearStaleHeld() {
	holding := g.Lifecycle.HeldByGang()
	stale := func(ref ident.Ref, annotations map[string]string) {
		if _, ok := annotations[queue.HeldAnnotation]; ok {
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
