package plane

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/estimator"
	"github.com/phalanx-sched/phalanx/internal/global"
	"github.com/phalanx-sched/phalanx/internal/testcluster"
)

// One API server serves every test of the plane that crosses the API;
// each works in its own namespace and schedulerName.
func TestPlaneOnAPIServer(t *testing.T) {
	c, err := testcluster.Start(t, testcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := testContext(t)
	defer cancel()
	if err := installKarmadaCRDs(ctx, c, "testdata/karmada-crds.yaml"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Phalanx.SchedulingV1alpha1().Queues().Create(ctx, &phalanxv1alpha1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}, Spec: phalanxv1alpha1.QueueSpec{Weight: 1}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Run("writes verdicts", func(t *testing.T) { testPlaneWritesVerdicts(t, c) })
	t.Run("writer", func(t *testing.T) { testWriter(t, c) })
	t.Run("writer conflict", func(t *testing.T) { testWriterConflict(t, c) })
	t.Run("writer confirm", func(t *testing.T) { testWriterConfirm(t, c) })
	t.Run("world", func(t *testing.T) { testWorld(t, c) })
	t.Run("positions writer", func(t *testing.T) { testPositionsWriter(t, c) })
	// Last: its member is seen by every plane after it.
	t.Run("without queues", func(t *testing.T) { testPlaneWithoutQueues(t, c) })
}

// installKarmadaCRDs installs the schema-less Karmada CRDs of path.
func installKarmadaCRDs(ctx context.Context, c *testcluster.Cluster, path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return c.InstallCRDYAML(ctx, raw)
}

func testContext(t *testing.T) (context.Context, context.CancelFunc) {
	return context.WithCancel(klog.NewContext(context.Background(), ktesting.NewLogger(t, ktesting.NewConfig())))
}

func namespace(t *testing.T, c *testcluster.Cluster, name string, labels map[string]string) {
	t.Helper()
	ns := &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if _, err := c.Client.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func getBinding(t *testing.T, c *testcluster.Cluster, ns, name string) *binding {
	t.Helper()
	u, err := c.Dynamic.Resource(ResourceBindings).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b := &binding{}
	if err := fromUnstructured(u, b); err != nil {
		t.Fatal(err)
	}
	return b
}

// events drains what the recorder was sent since the last call.
func events(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// The writer writes a waiting verdict only when the condition changes
// (counted by the binding's resourceVersion), and sends an event only when
// the reason does; a dispatch and a move set spec.clusters and the time
// the job is read back as dispatched at.
func testWriter(t *testing.T, c *testcluster.Cluster) {
	ctx, cancel := testContext(t)
	defer cancel()
	namespace(t, c, "w", nil)
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC))
	rec := record.NewFakeRecorder(100)
	w := &writer{client: c.Dynamic, recorder: rec, clock: clk}
	create(t, c.Dynamic, ResourceBindings, bindingIn("w", "wait", "phalanx-writer", 2, nil))
	job := &global.Job{Key: "w/wait-job", Queue: "q"}
	for _, step := range []struct {
		name   string
		reason global.Reason
		msg    string
		write  bool
		event  string
	}{
		{name: "first verdict", reason: global.NoMemberFitsNow, msg: "m1: 0 whole sets fit now", write: true, event: "Normal NoMemberFitsNow"},
		{name: "unchanged", reason: global.NoMemberFitsNow, msg: "m1: 0 whole sets fit now"},
		{name: "new message", reason: global.NoMemberFitsNow, msg: "m1: 0 whole sets fit now; m2: 0 whole sets fit now", write: true},
		{name: "new reason", reason: global.QueueRefused, msg: "queue q is closed", write: true, event: "Warning QueueRefused"},
	} {
		b := getBinding(t, c, "w", "wait-job")
		if err := w.apply(ctx, b, global.Verdict{Job: job, Reason: step.reason, Message: step.msg}); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		after := getBinding(t, c, "w", "wait-job")
		if wrote := after.ResourceVersion != b.ResourceVersion; wrote != step.write {
			t.Fatalf("%s: wrote %v (resourceVersion %s → %s), want %v", step.name, wrote, b.ResourceVersion, after.ResourceVersion, step.write)
		}
		cond := apimeta.FindStatusCondition(after.Status.Conditions, ScheduledCondition)
		if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != string(step.reason) || cond.Message != step.msg {
			t.Fatalf("%s: condition %+v, want Scheduled=False %s %q", step.name, cond, step.reason, step.msg)
		}
		// As karmada-scheduler, a waiting binding's generation is not
		// observed: Karmada's graceful eviction would take it as placed.
		if after.Status.SchedulerObservedGeneration != 0 {
			t.Fatalf("%s: schedulerObservedGeneration %d on a waiting binding", step.name, after.Status.SchedulerObservedGeneration)
		}
		got := events(rec)
		if step.event == "" && len(got) != 0 || step.event != "" && (len(got) != 1 || !strings.HasPrefix(got[0], step.event+" "+step.msg)) {
			t.Fatalf("%s: events %q, want %q", step.name, got, step.event)
		}
	}

	// A dispatch, then a move 40 minutes later: each is read back as
	// dispatched when it was written.
	create(t, c.Dynamic, ResourceBindings, bindingIn("w", "move", "phalanx-writer", 2, nil))
	job = &global.Job{Key: "w/move-job", Queue: "q"}
	for _, step := range []struct {
		member string
		move   bool
		event  string
	}{{member: "m1", event: "Normal Success"}, {member: "m2", move: true, event: "Normal Moved"}} {
		b := getBinding(t, c, "w", "move-job")
		if err := w.apply(ctx, b, global.Verdict{Job: job, Member: step.member, Reason: global.Dispatched, Move: step.move, Message: "to " + step.member}); err != nil {
			t.Fatal(err)
		}
		after := getBinding(t, c, "w", "move-job")
		j := jobOf(after, nil, nil, "default")
		if len(after.Spec.Clusters) != 1 || after.Spec.Clusters[0] != (targetCluster{Name: step.member, Replicas: 2}) || !apimeta.IsStatusConditionTrue(after.Status.Conditions, ScheduledCondition) {
			t.Fatalf("after dispatching to %s: clusters %+v, conditions %+v", step.member, after.Spec.Clusters, after.Status.Conditions)
		}
		if after.Status.SchedulerObservedGeneration != after.Generation {
			t.Fatalf("after dispatching to %s: schedulerObservedGeneration %d, generation %d", step.member, after.Status.SchedulerObservedGeneration, after.Generation)
		}
		if j.Member != step.member || !j.Since.Equal(clk.Now()) {
			t.Fatalf("read back as on %s since %v, want %s since %v (when it was dispatched there)", j.Member, j.Since, step.member, clk.Now())
		}
		if got := events(rec); len(got) != 1 || !strings.HasPrefix(got[0], step.event) {
			t.Fatalf("events %q, want one %s", got, step.event)
		}
		clk.Step(40 * time.Minute)
	}
}

// A binding changed since it was read is not written over. A dispatch on
// a stale binding fails with a conflict and writes nothing. A condition on
// a binding that another controller changed meanwhile (its labels) is
// written once the binding is read again, the other change kept, but not
// on one whose spec.clusters changed meanwhile.
func testWriterConflict(t *testing.T, c *testcluster.Cluster) {
	ctx, cancel := testContext(t)
	defer cancel()
	namespace(t, c, "conflict", nil)
	w := &writer{client: c.Dynamic, recorder: record.NewFakeRecorder(100), clock: clock.RealClock{}}
	create(t, c.Dynamic, ResourceBindings, bindingIn("conflict", "stale", "phalanx-writer", 2, nil))
	stale := getBinding(t, c, "conflict", "stale-job")
	ri := c.Dynamic.Resource(ResourceBindings).Namespace("conflict")
	u, err := ri.Get(ctx, "stale-job", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u.SetLabels(map[string]string{"changed-by": "karmada"})
	if _, err := ri.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	job := &global.Job{Key: "conflict/stale-job", Queue: "q"}
	b := *stale
	err = w.apply(ctx, &b, global.Verdict{Job: job, Member: "m1", Reason: global.Dispatched, Message: "to m1"})
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "conflict/stale-job") {
		t.Fatalf("dispatching a stale binding: %v, want a conflict naming the binding", err)
	}
	if after := getBinding(t, c, "conflict", "stale-job"); after.Labels["changed-by"] != "karmada" || len(after.Spec.Clusters) != 0 || len(after.Status.Conditions) != 0 {
		t.Fatalf("after a failed dispatch: labels %v, clusters %v, conditions %v; want the other change kept and nothing written", after.Labels, after.Spec.Clusters, after.Status.Conditions)
	}
	b = *stale
	if err := w.apply(ctx, &b, global.Verdict{Job: job, Reason: global.NoMemberFitsNow, Message: "waits"}); err != nil {
		t.Fatalf("a waiting condition on a binding whose labels changed: %v", err)
	}
	after := getBinding(t, c, "conflict", "stale-job")
	if cond := apimeta.FindStatusCondition(after.Status.Conditions, ScheduledCondition); cond == nil || cond.Reason != string(global.NoMemberFitsNow) || after.Labels["changed-by"] != "karmada" {
		t.Fatalf("after the retried write: labels %v, conditions %v; want both", after.Labels, after.Status.Conditions)
	}

	// Dispatched by someone else meanwhile: the stale waiting verdict is
	// not written.
	stale = getBinding(t, c, "conflict", "stale-job")
	if err := w.apply(ctx, getBinding(t, c, "conflict", "stale-job"), global.Verdict{Job: job, Member: "m1", Reason: global.Dispatched, Message: "to m1"}); err != nil {
		t.Fatal(err)
	}
	b = *stale
	if err := w.apply(ctx, &b, global.Verdict{Job: job, Reason: global.QueueAboveShare, Message: "above"}); err == nil || !strings.Contains(err.Error(), "spec.clusters changed") {
		t.Fatalf("a waiting verdict on a binding dispatched meanwhile: %v, want refused", err)
	}
	if cond := apimeta.FindStatusCondition(getBinding(t, c, "conflict", "stale-job").Status.Conditions, ScheduledCondition); cond.Status != metav1.ConditionTrue {
		t.Fatalf("the dispatch's condition was overwritten: %+v", cond)
	}
}

// A binding dispatched whose Scheduled condition does not say so (the
// status write failed, or the tier stopped between its two writes) is
// confirmed: Scheduled=True, its spec left as it is.
func testWriterConfirm(t *testing.T, c *testcluster.Cluster) {
	ctx, cancel := testContext(t)
	defer cancel()
	namespace(t, c, "confirm", nil)
	w := &writer{client: c.Dynamic, recorder: record.NewFakeRecorder(100), clock: clock.RealClock{}}
	create(t, c.Dynamic, ResourceBindings, bindingIn("confirm", "half", "phalanx-writer", 2, nil))
	b := getBinding(t, c, "confirm", "half-job")
	if _, _, err := w.dispatch(ctx, b, "m2", "q"); err != nil {
		t.Fatal(err)
	}
	half := getBinding(t, c, "confirm", "half-job")
	if err := w.confirm(ctx, half); err != nil {
		t.Fatal(err)
	}
	after := getBinding(t, c, "confirm", "half-job")
	cond := apimeta.FindStatusCondition(after.Status.Conditions, ScheduledCondition)
	if cond == nil || cond.Status != metav1.ConditionTrue || !strings.Contains(cond.Message, "m2") || after.Generation != half.Generation || after.Spec.Clusters[0].Name != "m2" {
		t.Fatalf("confirmed: %+v, generation %d -> %d, clusters %v", cond, half.Generation, after.Generation, after.Spec.Clusters)
	}
	rv := after.ResourceVersion
	if err := w.confirm(ctx, after); err != nil {
		t.Fatal(err)
	}
	if again := getBinding(t, c, "confirm", "half-job"); again.ResourceVersion != rv {
		t.Fatalf("confirming a confirmed binding wrote it again (%s -> %s)", rv, again.ResourceVersion)
	}
}

// countingTemplates counts reads; a template it does not hold fails.
type countingTemplates struct {
	mu    sync.Mutex
	tmpl  map[string]*estimator.Template
	reads map[string]int
}

func (c *countingTemplates) Of(_ context.Context, _, kind, namespace, name string) (*estimator.Template, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reads[name]++
	if t, ok := c.tmpl[name]; ok {
		return t, nil
	}
	return nil, fmt.Errorf("%s %s/%s: forbidden", kind, namespace, name)
}

func (c *countingTemplates) count(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads[name]
}

// world reads the informers' objects: only the tier's bindings that are not
// being deleted, the queue from the template or else the namespace, a
// template it cannot read as InvalidJob naming it, and each template once
// per version of it, forgotten with its binding.
func testWorld(t *testing.T, c *testcluster.Cluster) {
	ctx, cancel := testContext(t)
	defer cancel()
	namespace(t, c, "world", map[string]string{phalanxv1alpha1.QueueLabel: "ns-queue"})
	const sched = "phalanx-world"
	create(t, c.Dynamic, ResourceBindings, bindingIn("world", "plain", sched, 1, nil))
	labelled := create(t, c.Dynamic, ResourceBindings, bindingIn("world", "labelled", sched, 1, nil))
	create(t, c.Dynamic, ResourceBindings, bindingIn("world", "broken", sched, 1, nil))
	create(t, c.Dynamic, ResourceBindings, bindingIn("world", "theirs", "default-scheduler", 1, nil))
	deleting := bindingIn("world", "deleting", sched, 1, nil)
	deleting["metadata"].(map[string]any)["finalizers"] = []any{"phalanx.dev/test-hold"}
	create(t, c.Dynamic, ResourceBindings, deleting)
	ri := c.Dynamic.Resource(ResourceBindings).Namespace("world")
	if err := ri.Delete(ctx, "deleting-job", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	tainted := clusterObj("world-a", 8)
	tainted["spec"].(map[string]any)["taints"] = []any{map[string]any{"key": "cluster.karmada.io/unreachable", "effect": "NoSchedule"}}
	create(t, c.Dynamic, Clusters, clusterObj("world-b", 8))
	create(t, c.Dynamic, Clusters, tainted)

	templates := &countingTemplates{reads: map[string]int{}, tmpl: map[string]*estimator.Template{
		"plain": {}, "labelled": {Labels: map[string]string{phalanxv1alpha1.QueueLabel: "team-a"}}, "theirs": {}, "deleting": {},
	}}
	p := New(Options{SchedulerName: sched, DefaultQueue: "default", Interval: time.Second}, c.Dynamic, c.Client, templates, nil, clock.RealClock{})
	if err := p.start(ctx); err != nil {
		t.Fatal(err)
	}
	jobs := func() map[string]*global.Job {
		w, bindings := p.world(ctx)
		out := map[string]*global.Job{}
		for _, j := range w.Jobs {
			if j.Namespace == "world" {
				out[j.Name] = j
				if bindings[j.UID] == nil {
					t.Fatalf("%s has no binding to write its verdict on", j.Key)
				}
			}
		}
		return out
	}
	// until the informers hold the namespace, the clusters and the five
	// bindings, one of them being deleted
	seen := func(context.Context) (bool, error) {
		_, ns, _ := p.namespaces.GetStore().GetByKey("world")
		_, cl, _ := p.clusters.GetStore().GetByKey("world-a")
		n, gone := 0, false
		for _, obj := range p.bindings.GetStore().List() {
			if u := obj.(*unstructured.Unstructured); u.GetNamespace() == "world" {
				n++
				gone = gone || u.GetDeletionTimestamp() != nil
			}
		}
		return ns && cl && n == 5 && gone, nil
	}
	if err := testcluster.Eventually(ctx, 10*time.Second, seen); err != nil {
		t.Fatalf("the informers never saw the world's objects: %v", err)
	}
	got := jobs()
	var names []string
	for n := range got {
		names = append(names, n)
	}
	sort.Strings(names)
	if strings.Join(names, ",") != "broken,labelled,plain" {
		t.Fatalf("jobs %v, want broken, labelled and plain (not another scheduler's, not one being deleted)", names)
	}
	if got["plain"].Queue != "ns-queue" || got["labelled"].Queue != "team-a" {
		t.Fatalf("queues: plain %s (want the namespace's ns-queue), labelled %s (want the template's team-a)", got["plain"].Queue, got["labelled"].Queue)
	}
	if want := "reading its resource template Job world/broken: Job world/broken: forbidden"; got["broken"].Invalid != want {
		t.Fatalf("broken's Invalid %q, want %q", got["broken"].Invalid, want)
	}
	w, _ := p.world(ctx)
	var members []string
	ready := map[string]bool{}
	for _, m := range w.Members {
		if strings.HasPrefix(m.Name, "world-") {
			members = append(members, m.Name)
			ready[m.Name] = m.Ready
		}
	}
	if strings.Join(members, ",") != "world-a,world-b" || ready["world-a"] || !ready["world-b"] {
		t.Fatalf("members %v ready %v, want world-a (tainted NoSchedule: not ready) then world-b", members, ready)
	}
	for name, want := range map[string]int{"theirs": 0, "deleting": 0, "plain": 1, "labelled": 1, "broken": 2} {
		if n := templates.count(name); n != want {
			t.Errorf("template %s read %d times over 2 passes, want %d (a failed read is retried each pass)", name, n, want)
		}
	}

	// A new template version is read again; a deleted binding's template
	// is forgotten.
	u, err := ri.Get(ctx, "plain-job", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(u.Object, "2", "spec", "resource", "resourceVersion"); err != nil {
		t.Fatal(err)
	}
	if _, err := ri.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := ri.Delete(ctx, "labelled-job", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := testcluster.Eventually(ctx, 10*time.Second, func(context.Context) (bool, error) {
		j := jobs()
		return j["labelled"] == nil && templates.count("plain") == 2, nil
	}); err != nil {
		t.Fatalf("plain's new template version was read %d times in all, want 2: %v", templates.count("plain"), err)
	}
	p.mu.Lock()
	_, remembered := p.tmplCache[labelled.GetUID()]
	p.mu.Unlock()
	if remembered {
		t.Fatal("the deleted binding's template is still cached")
	}
}
