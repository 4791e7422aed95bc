package controller

import (
	"context"
	"encoding/json"
	"reflect"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/devices"
	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/internal/queue"
	"github.com/phalanx-sched/phalanx/internal/resources"
	"github.com/phalanx-sched/phalanx/internal/served"
	"github.com/phalanx-sched/phalanx/internal/workload"
)

// QueueStatusUpdater keeps Queue status: allocated and deserved resources,
// pending and running gangs, and a Valid condition that says why a queue the
// scheduler ignores (cycle, missing parent, guarantee above capability) is
// invalid. It keeps a queue.Cache — the scheduler's own accounting — fed by
// watch events, and writes status when something changed, at most every
// MinInterval: shares depend on every queue at once, so the whole tree is
// recomputed together.
type QueueStatusUpdater struct {
	client.Client
	Cache        cache.Cache
	DefaultQueue string
	// UsageHalfLife turns decayed fair share on (0: off): recent usage is
	// followed as the scheduler follows it and written in Queue.status.
	UsageHalfLife time.Duration
	// MinInterval spaces status writes under a stream of events.
	MinInterval time.Duration
	// Served asks discovery whether the API server serves a resource: the
	// Workload API (scheduling.k8s.io/v1beta1 PodGroups and Workloads) is
	// watched while it is served, looked for at start and every
	// WorkloadAPIRecheck, as in the scheduler; while it is not, its pods'
	// group labels are unknown. nil: never watched.
	Served func(groupVersion, resource string) (bool, error)
	// WorkloadAPIRecheck is how often Served is asked again (0: 30 s).
	WorkloadAPIRecheck time.Duration
	// upstream and workloads: the Workload API's PodGroups and Workloads
	// are watched now.
	upstream, workloads atomic.Bool
	// DRA says whether the API server serves resource.k8s.io/v1: then a
	// pod's ResourceClaims count as its classes' queue resources and the
	// devices nodes' ResourceSlices publish count in the total, as in the
	// scheduler (internal/devices); else nothing of DRA is watched.
	DRA bool

	acct *queue.Cache
	// devices counts pods' devices and slices' (nil without DRA);
	// slices are each node's slices' counts.
	devices *devices.Devices
	slices  *devices.NodeSlices
	// recount is set when a DeviceClass changed: the next sync counts
	// every slice and charges every pod again (a class's queue resource
	// name or selectors changed).
	recount atomic.Bool
	changed chan struct{}
	last    map[string]phalanxv1alpha1.QueueStatus

	// Positions: the API server serves QueuePositions (phalanx's CRDs are
	// up to date); each namespace's pending gangs' positions are written.
	Positions bool
	// PositionsInterval spaces the writes of QueuePositions (0: 2 s): a
	// gang that starts moves every gang behind it, so positions are written
	// at most this often, per namespace whose gangs moved.
	PositionsInterval time.Duration
	positionsAt       time.Time
}

// Start runs until ctx ends (a controller-runtime Runnable).
func (u *QueueStatusUpdater) Start(ctx context.Context) error {
	u.acct = queue.NewCache()
	u.acct.DecayUsage(u.UsageHalfLife, clock.RealClock{})
	u.changed = make(chan struct{}, 1)
	u.last = map[string]phalanxv1alpha1.QueueStatus{}
	if u.DRA {
		u.useDevices(ctx)
		u.recount.Store(true)
	}
	if err := u.watch(ctx); err != nil {
		return err
	}
	if !u.Cache.WaitForCacheSync(ctx) {
		return ctx.Err()
	}
	u.poke()
	var decay <-chan time.Time
	if u.UsageHalfLife > 0 {
		// Recent usage moves with no event: status follows it.
		t := time.NewTicker(max(5*time.Second, u.UsageHalfLife/16))
		defer t.Stop()
		decay = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-u.changed:
		case <-decay:
		}
		if err := u.sync(ctx); err != nil {
			log.FromContext(ctx).V(1).Info("Queue status", "err", err)
			u.poke()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(u.MinInterval):
		}
	}
}

// NeedLeaderElection: only the leader writes status.
func (u *QueueStatusUpdater) NeedLeaderElection() bool { return true }

func (u *QueueStatusUpdater) poke() {
	select {
	case u.changed <- struct{}{}:
	default:
	}
}

// watch feeds the accounting from the manager's informers.
func (u *QueueStatusUpdater) watch(ctx context.Context) error {
	handlers := []watchHandler{
		{&v1.Pod{}, toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { u.chargePod(ctx, obj) },
			UpdateFunc: func(_, obj any) { u.chargePod(ctx, obj) },
			DeleteFunc: func(obj any) {
				if p, ok := unwrap(obj).(*v1.Pod); ok {
					u.feed(ctx).DeletePod(p.UID)
					u.poke()
				}
			},
		}},
		{&v1.Node{}, toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { u.setNode(obj) },
			UpdateFunc: func(_, obj any) { u.setNode(obj) },
			DeleteFunc: func(obj any) {
				if n, ok := unwrap(obj).(*v1.Node); ok {
					u.feed(ctx).DeleteNode(n.Name)
					u.poke()
				}
			},
		}},
		{&phalanxv1alpha1.Queue{}, toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { u.setQueue(obj) },
			UpdateFunc: func(_, obj any) { u.setQueue(obj) },
			DeleteFunc: func(obj any) {
				if q, ok := unwrap(obj).(*phalanxv1alpha1.Queue); ok {
					u.feed(ctx).DeleteQueue(q.Name)
					u.poke()
				}
			},
		}},
		// A queue label on a namespace or a PodGroup moves pods between queues.
		{&v1.Namespace{}, toolscache.ResourceEventHandlerFuncs{
			UpdateFunc: func(oldObj, obj any) {
				o, n := oldObj.(*v1.Namespace), obj.(*v1.Namespace)
				if o.Labels[queue.Label] != n.Labels[queue.Label] {
					u.recharge(ctx, client.InNamespace(n.Name))
				}
			},
		}},
		{&pgv1alpha1.PodGroup{}, toolscache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) {
				pg := obj.(*pgv1alpha1.PodGroup)
				u.recharge(ctx, client.InNamespace(pg.Namespace), client.MatchingFields{gangField: pg.Name})
			},
			UpdateFunc: func(oldObj, obj any) {
				o, n := oldObj.(*pgv1alpha1.PodGroup), obj.(*pgv1alpha1.PodGroup)
				if o.Labels[queue.Label] != n.Labels[queue.Label] {
					u.recharge(ctx, client.InNamespace(n.Namespace), client.MatchingFields{gangField: n.Name})
				}
				if o.Status.Phase != n.Status.Phase || publishedChanged(o.Annotations, n.Annotations) {
					u.poke()
				}
			},
			DeleteFunc: func(obj any) {
				if pg, ok := unwrap(obj).(*pgv1alpha1.PodGroup); ok {
					u.recharge(ctx, client.InNamespace(pg.Namespace), client.MatchingFields{gangField: pg.Name})
				}
				u.poke()
			},
		}},
	}
	if u.DRA {
		handlers = append(handlers, u.deviceHandlers(ctx)...)
	}
	if err := u.addHandlers(ctx, handlers); err != nil {
		return err
	}
	if u.Served != nil {
		follower := &served.Follower{Served: u.Served, Apply: u.followWorkload}
		follower.Check(ctx)
		recheck := u.WorkloadAPIRecheck
		if recheck <= 0 {
			recheck = 30 * time.Second
		}
		go follower.Run(ctx, recheck)
	}
	return nil
}

func (u *QueueStatusUpdater) addHandlers(ctx context.Context, handlers []watchHandler) error {
	for _, h := range handlers {
		inf, err := u.Cache.GetInformer(ctx, h.obj)
		if err != nil {
			return err
		}
		if _, err := inf.AddEventHandler(h.h); err != nil {
			return err
		}
	}
	return nil
}

// followWorkload moves from watching what was served of the Workload API to
// what is served now (served.Follower); the pods of its PodGroups are
// charged again either way (their queue may come from the PodGroup).
func (u *QueueStatusUpdater) followWorkload(ctx context.Context, prev, want served.WorkloadAPI) bool {
	logger := log.FromContext(ctx)
	if prev.PodGroups {
		u.upstream.Store(false)
		for _, obj := range []client.Object{&schedulingv1beta1.PodGroup{}, &schedulingv1beta1.Workload{}} {
			if err := u.Cache.RemoveInformer(ctx, obj); err != nil {
				logger.V(1).Info("Stopping a Workload API informer", "err", err)
			}
		}
		u.workloads.Store(false)
		if !want.PodGroups {
			logger.Info("The API server no longer serves the Workload API; its pods count in their own or their namespace's queue")
		}
	}
	if want.PodGroups {
		if err := u.addHandlers(ctx, u.workloadAPIHandlers(ctx, want.Workloads)); err != nil {
			logger.Error(err, "Watching the Workload API; retrying")
			return false
		}
		u.workloads.Store(want.Workloads)
		u.upstream.Store(true)
		logger.Info("Counting the Workload API's PodGroups in queues", "workloads", want.Workloads)
	}
	u.recharge(ctx)
	return true
}

// workloadAPIHandlers recharge pods whose upstream PodGroup (or its
// Workload) changed its queue label.
func (u *QueueStatusUpdater) workloadAPIHandlers(ctx context.Context, workloads bool) []watchHandler {
	// An upstream PodGroup's queue label (or its Workload's) moves its
	// pods between queues.
	rechargeGroup := func(obj any) {
		if pg, ok := unwrap(obj).(*schedulingv1beta1.PodGroup); ok {
			u.recharge(ctx, client.InNamespace(pg.Namespace), client.MatchingFields{upstreamGangField: pg.Name})
		}
	}
	handlers := []watchHandler{{&schedulingv1beta1.PodGroup{}, toolscache.ResourceEventHandlerFuncs{
		AddFunc: rechargeGroup,
		UpdateFunc: func(oldObj, obj any) {
			o, ok1 := oldObj.(*schedulingv1beta1.PodGroup)
			n, ok2 := obj.(*schedulingv1beta1.PodGroup)
			if ok1 && ok2 && (o.Labels[queue.Label] != n.Labels[queue.Label] || workload.WorkloadOf(o) != workload.WorkloadOf(n)) {
				rechargeGroup(n)
			}
			if ok1 && ok2 && publishedChanged(o.Annotations, n.Annotations) {
				u.poke()
			}
		},
		DeleteFunc: rechargeGroup,
	}}}
	if workloads {
		rechargeWorkload := func(obj any) {
			if wl, ok := unwrap(obj).(*schedulingv1beta1.Workload); ok {
				u.rechargeWorkload(ctx, wl)
			}
		}
		handlers = append(handlers, watchHandler{&schedulingv1beta1.Workload{}, toolscache.ResourceEventHandlerFuncs{
			AddFunc: rechargeWorkload,
			UpdateFunc: func(oldObj, obj any) {
				o, ok1 := oldObj.(*schedulingv1beta1.Workload)
				n, ok2 := obj.(*schedulingv1beta1.Workload)
				if ok1 && ok2 && o.Labels[queue.Label] != n.Labels[queue.Label] {
					rechargeWorkload(n)
				}
			},
			DeleteFunc: rechargeWorkload,
		}})
	}
	return handlers
}

// watchHandler handles the events of one kind of object.
type watchHandler struct {
	obj client.Object
	h   toolscache.ResourceEventHandlerFuncs
}

func unwrap(obj any) any {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		return tomb.Obj
	}
	return obj
}

// sync writes the status of every queue whose status changed.
func (u *QueueStatusUpdater) sync(ctx context.Context) error {
	if u.recount.Swap(false) {
		if err := u.recountDevices(ctx); err != nil {
			u.recount.Store(true)
			return err
		}
	}
	var queues phalanxv1alpha1.QueueList
	if err := u.Cache.List(ctx, &queues); err != nil {
		return err
	}
	var groups pgv1alpha1.PodGroupList
	if err := u.Cache.List(ctx, &groups); err != nil {
		return err
	}
	held, err := u.held(ctx, groups.Items)
	if err != nil {
		return err
	}
	snap := u.acct.Snapshot(held)
	statuses := snap.Status()
	if u.Positions {
		// Positions are a view: their failure must not hold queue status.
		if err := u.syncPositions(ctx, groups.Items, snap.Compare); err != nil {
			log.FromContext(ctx).V(1).Info("Queue positions", "err", err)
		}
	}
	running, pending := map[string]int32{}, map[string]int32{}
	for _, pg := range groups.Items {
		q := queue.Of(nil, pg.Labels, u.namespaceLabels(ctx, pg.Namespace), u.DefaultQueue)
		switch pg.Status.Phase {
		case pgv1alpha1.PodGroupRunning:
			running[q]++
		case pgv1alpha1.PodGroupPending, pgv1alpha1.PodGroupScheduling, "":
			pending[q]++
		}
	}
	for i := range queues.Items {
		q := &queues.Items[i]
		computed := statuses[q.Name]
		st := phalanxv1alpha1.QueueStatus{
			Allocated:    toResourceList(computed.Allocated),
			Deserved:     toResourceList(computed.Deserved),
			RecentUsage:  toResourceList(twoDigits(computed.Recent)),
			PendingGangs: pending[q.Name],
			RunningGangs: running[q.Name],
			Conditions:   append([]metav1.Condition(nil), q.Status.Conditions...),
		}
		cond := metav1.Condition{Type: "Valid", Status: metav1.ConditionTrue, Reason: "Valid", Message: "the scheduler uses this queue", ObservedGeneration: q.Generation}
		if computed.Invalid != "" {
			cond = metav1.Condition{Type: "Valid", Status: metav1.ConditionFalse, Reason: "Invalid", Message: computed.Invalid + "; the scheduler ignores this queue", ObservedGeneration: q.Generation}
		}
		meta.SetStatusCondition(&st.Conditions, cond)
		if prev, ok := u.last[q.Name]; ok && reflect.DeepEqual(prev, st) {
			continue
		}
		// A merge patch keeps what it does not name: resources gone from
		// allocated or deserved are named null, gang counts that fell to
		// zero are named (the API type omits them when empty).
		prev := u.last[q.Name]
		body, err := json.Marshal(map[string]any{"status": map[string]any{
			"allocated":    resourcePatch(st.Allocated, q.Status.Allocated, prev.Allocated),
			"deserved":     resourcePatch(st.Deserved, q.Status.Deserved, prev.Deserved),
			"recentUsage":  resourcePatch(st.RecentUsage, q.Status.RecentUsage, prev.RecentUsage),
			"pendingGangs": st.PendingGangs,
			"runningGangs": st.RunningGangs,
			"conditions":   st.Conditions,
		}})
		if err != nil {
			return err
		}
		if err := u.Status().Patch(ctx, q, client.RawPatch(types.MergePatchType, body)); err != nil {
			return client.IgnoreNotFound(err)
		}
		u.last[q.Name] = st
	}
	return nil
}

// heldGang names a gang whose group object carries the held annotation.
type heldGang struct {
	upstream        bool
	namespace, name string
	labels          map[string]string
}

// held is what gangs' plans and reservations hold, per queue, from the held
// annotation the scheduler writes on their group objects: counted with
// queue.ChargeHeld, as the scheduler's queue snapshot counts it, in the
// queue of the gang (queue.Of with a member, the group object's labels and
// the namespace's).
func (u *QueueStatusUpdater) held(ctx context.Context, groups []pgv1alpha1.PodGroup) (map[string]resources.List, error) {
	byGang := map[*heldGang]resources.List{}
	add := func(g *heldGang, annotations map[string]string) {
		if l, err := queue.DecodeHeld(annotations[queue.HeldAnnotation]); err != nil {
			log.FromContext(ctx).V(1).Info("Ignoring an unreadable held annotation", "podGroup", g.namespace+"/"+g.name, "err", err)
		} else if !l.IsZero() {
			byGang[g] = l
		}
	}
	for i := range groups {
		pg := &groups[i]
		add(&heldGang{namespace: pg.Namespace, name: pg.Name, labels: pg.Labels}, pg.Annotations)
	}
	if u.upstream.Load() {
		var upstream schedulingv1beta1.PodGroupList
		if err := u.Cache.List(ctx, &upstream); err != nil {
			return nil, err
		}
		for i := range upstream.Items {
			pg := &upstream.Items[i]
			if _, ok := pg.Annotations[queue.HeldAnnotation]; !ok {
				continue
			}
			var wl *schedulingv1beta1.Workload
			if name := workload.WorkloadOf(pg); name != "" && u.workloads.Load() {
				w := &schedulingv1beta1.Workload{}
				if err := u.Cache.Get(ctx, types.NamespacedName{Namespace: pg.Namespace, Name: name}, w); err == nil {
					wl = w
				}
			}
			add(&heldGang{upstream: true, namespace: pg.Namespace, name: pg.Name,
				labels: workload.UpstreamGroupLabels(pg, wl)}, pg.Annotations)
		}
	}
	return queue.ChargeHeld(byGang, func(g *heldGang) (string, bool) {
		field := gangField
		if g.upstream {
			field = upstreamGangField
		}
		var member *v1.Pod
		var pods v1.PodList
		if err := u.Cache.List(ctx, &pods, client.InNamespace(g.namespace), client.MatchingFields{field: g.name}); err == nil {
			ms := make([]*v1.Pod, len(pods.Items))
			for i := range pods.Items {
				ms[i] = &pods.Items[i]
			}
			member = ident.Oldest(ms)
		}
		return queue.Of(member, g.labels, u.namespaceLabels(ctx, g.namespace), u.DefaultQueue), true
	}), nil
}

// namespaceLabels are a namespace's labels (nil when it is not in the cache).
func (u *QueueStatusUpdater) namespaceLabels(ctx context.Context, name string) map[string]string {
	ns := &v1.Namespace{}
	if err := u.Cache.Get(ctx, types.NamespacedName{Name: name}, ns); err != nil {
		return nil
	}
	return ns.Labels
}

// resourcePatch is the merge patch that turns a resource list into want:
// want's quantities, and null for the resources of the lists it replaces
// that want lacks.
func resourcePatch(want v1.ResourceList, replaced ...v1.ResourceList) map[v1.ResourceName]any {
	out := map[v1.ResourceName]any{}
	for _, l := range replaced {
		for r := range l {
			out[r] = nil
		}
	}
	for r, q := range want {
		out[r] = q
	}
	return out
}

// twoDigits keeps two significant digits of each amount: recent usage
// moves all the time, and its status is rewritten only when it moved by
// about a percent or more.
func twoDigits(l resources.List) resources.List {
	out := make(resources.List, len(l))
	for r, v := range l {
		p := int64(1)
		for v/p >= 100 {
			p *= 10
		}
		out[r] = (v + p/2) / p * p
	}
	return out
}

// toResourceList renders amounts as quantities (CPU in millicores).
func toResourceList(l resources.List) v1.ResourceList {
	out := v1.ResourceList{}
	for r, v := range l {
		if v == 0 {
			continue
		}
		out[r] = queue.Quantity(r, v)
	}
	return out
}

// publishedChanged: the scheduler's held or expected-start annotation on a
// group object changed (queue status and positions follow).
func publishedChanged(old, cur map[string]string) bool {
	return old[queue.HeldAnnotation] != cur[queue.HeldAnnotation] ||
		old[phalanxv1alpha1.ExpectedStartAnnotation] != cur[phalanxv1alpha1.ExpectedStartAnnotation]
}
