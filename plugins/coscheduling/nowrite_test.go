package coscheduling

import (
	"os"
	"os/exec"
	"regexp"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/utils/ptr"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/plugins/internal/plugintest"
)

// ancestry is the GODEBUG setting under which goroutines' stacks carry the
// stacks of the goroutines that started them, so a write made by a
// goroutine a scheduling cycle spawned is traced back to the cycle. The
// runtime reads it only at start: TestMain runs the tests again under it.
const ancestry = "tracebackancestors=50"

func TestMain(m *testing.M) {
	if !strings.Contains(os.Getenv("GODEBUG"), ancestry) {
		cmd := exec.Command(os.Args[0], os.Args[1:]...)
		cmd.Env = append(os.Environ(), "GODEBUG="+strings.TrimPrefix(os.Getenv("GODEBUG")+","+ancestry, ","))
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			if exit, ok := err.(*exec.ExitError); ok {
				os.Exit(exit.ExitCode())
			}
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// cycleFrame matches the extension points that must not write to the API:
// a scheduling cycle (PreFilter, Filter), the queue sort (Less) and
// PreEnqueue only read; objects a gang needs are made by informer handlers,
// and conditions go through the asynchronous status writer.
var cycleFrame = regexp.MustCompile(`phalanx/plugins/[a-z]+\.\(\*[A-Za-z]+\)\.(PreFilter|Filter|Less|PreEnqueue)\(`)

// writeRecorder records every write to a fake clientset with its stack
// (and its ancestors').
type writeRecorder struct {
	mu     sync.Mutex
	writes []string
}

func (r *writeRecorder) react(a k8stesting.Action) (bool, k8sruntime.Object, error) {
	switch a.GetVerb() {
	case "create", "update", "patch", "delete", "delete-collection":
	default:
		return false, nil, nil
	}
	buf := make([]byte, 1<<20)
	n := goruntime.Stack(buf, false)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes = append(r.writes, a.GetVerb()+" "+a.GetResource().Resource+"/"+a.GetSubresource()+"\n"+string(buf[:n]))
	return false, nil, nil
}

func (r *writeRecorder) fromCycle() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, w := range r.writes {
		if cycleFrame.MatchString(w) {
			out = append(out, w)
		}
	}
	return out
}

// TestCycleWritesNothing: PreEnqueue, PreFilter, Filter and the queue sort
// make no API write, directly or from a goroutine they start, for a pod of
// every gang source (a labelled PodGroup, an implicit gang whose PodGroup
// does not exist yet, a Workload API PodGroup) and a plain pod. The implicit
// gang's PodGroup is made anyway, by the pod informer's handler.
func TestCycleWritesNothing(t *testing.T) {
	labelled := members("lab", 2, "1", 0)
	implicit := []*v1.Pod{plugintest.Pod("imp-a", "", "1", 0), plugintest.Pod("imp-b", "", "1", 0)}
	for _, p := range implicit {
		p.Annotations = map[string]string{phalanxv1alpha1.GangSizeAnnotation: "2"}
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "imp", UID: "job-imp", Controller: ptr.To(true)}}
	}
	upstream := []*v1.Pod{plugintest.Pod("up-a", "", "1", 0), plugintest.Pod("up-b", "", "1", 0)}
	for _, p := range upstream {
		p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To("up")}
	}
	plain := plugintest.Pod("plain", "", "1", 0)
	all := append(append(append(append([]*v1.Pod{}, labelled...), implicit...), upstream...), plain)
	// The implicit gang's members reach the API only after the cycles: the
	// cycles see a gang whose PodGroup does not exist.
	existing := append(append(append([]*v1.Pod{}, labelled...), upstream...), plain)
	upPG := &schedulingv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "up", Namespace: "default", UID: "pg-up"},
		Spec:       schedulingv1beta1.PodGroupSpec{SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 2}}},
	}
	e, pl := env(t, plugintest.Objects{
		Nodes:             []*v1.Node{plugintest.Node("n0", "2", 0, nil), plugintest.Node("n1", "8", 0, nil)},
		PodGroups:         []*pgv1alpha1.PodGroup{plugintest.PodGroup("lab", 2)},
		UpstreamPodGroups: []*schedulingv1beta1.PodGroup{upPG},
		Pods:              existing,
	})
	rec := &writeRecorder{}
	e.Client.PrependReactor("*", "*", rec.react)
	e.PG.PrependReactor("*", "*", rec.react)
	e.Phalanx.PrependReactor("*", "*", rec.react)
	e.Eventually("every member indexed", func() bool {
		return len(pl.gangs.Members(ident.Ref{Namespace: "default", Name: "lab"})) == 2 &&
			len(pl.gangs.Members(ident.Ref{Source: ident.SourceWorkload, Namespace: "default", Name: "up"})) == 2
	})

	for _, p := range all {
		_ = pl.PreEnqueue(e.Ctx, p)
		state, _, _ := e.Cycle(p)
		e.Filter(state, p)
		for _, q := range all {
			pl.Less(queued(p), queued(q))
		}
	}
	// The implicit gang's PodGroup is made outside the cycle, from the
	// informer once its members exist: wait for it, and for the writes the
	// cycles set off.
	for _, p := range implicit {
		if _, err := e.Client.CoreV1().Pods("default").Create(e.Ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	implicitRef, _ := pl.gangs.RefOf(implicit[0])
	e.Eventually("the implicit gang's PodGroup", func() bool {
		_, err := e.PG.SchedulingV1alpha1().PodGroups("default").Get(e.Ctx, implicitRef.Name, metav1.GetOptions{})
		return err == nil
	})
	e.Eventually("the labelled gang's plan published (its held annotation)", func() bool {
		pg, err := e.PG.SchedulingV1alpha1().PodGroups("default").Get(e.Ctx, "lab", metav1.GetOptions{})
		return err == nil && pg.Annotations[phalanxv1alpha1.HeldAnnotation] != ""
	})
	if bad := rec.fromCycle(); len(bad) > 0 {
		lines := strings.Split(bad[0], "\n")
		t.Fatalf("%d API writes from a scheduling cycle, the queue sort or PreEnqueue; the first:\n%s",
			len(bad), strings.Join(lines[:min(60, len(lines))], "\n"))
	}
}

func queued(p *v1.Pod) fwk.QueuedEntityInfo {
	pi, _ := framework.NewPodInfo(p)
	return &framework.QueuedPodInfo{PodInfo: pi}
}
