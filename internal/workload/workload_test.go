package workload

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

const (
	size  = phalanxv1alpha1.GangSizeAnnotation
	name  = phalanxv1alpha1.GangNameAnnotation
	scope = phalanxv1alpha1.GangScopeAnnotation
)

type podOpt func(*v1.Pod)

func pod(podName string, opts ...podOpt) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: podName, Namespace: "team-a", UID: types.UID("uid-" + podName),
		Labels: map[string]string{}, Annotations: map[string]string{}}}
	for _, o := range opts {
		o(p)
	}
	return p
}

func ann(k, v string) podOpt   { return func(p *v1.Pod) { p.Annotations[k] = v } }
func label(k, v string) podOpt { return func(p *v1.Pod) { p.Labels[k] = v } }
func controller(apiVersion, kind, n, uid string) podOpt {
	return func(p *v1.Pod) {
		p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: n,
			UID: types.UID(uid), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)})
	}
}

// jobSetPod is a pod as the JobSet controller (v0.12) and the Job controller
// make it: owned by the child Job, labelled with the JobSet's name and UID.
func jobSetPod(podName, js, rjob string, jobIdx string, opts ...podOpt) *v1.Pod {
	job := js + "-" + rjob + "-" + jobIdx
	base := []podOpt{
		label(JobSetNameLabel, js), label(JobSetUIDLabel, "js-uid-"+js), label(JobSetReplicatedJobKey, rjob),
		label("jobset.sigs.k8s.io/job-index", jobIdx), label("batch.kubernetes.io/job-name", job),
		controller("batch/v1", "Job", job, "job-uid-"+job),
	}
	return pod(podName, append(base, opts...)...)
}

// lwsPod is a pod as LeaderWorkerSet (v0.10) makes it: the leader (worker
// index 0) owned by the leader StatefulSet, a worker by the group's worker
// StatefulSet, which the leader pod owns.
func lwsPod(lws string, group, worker string, opts ...podOpt) *v1.Pod {
	leader := lws + "-" + group
	podName := leader
	sts := lws
	if worker != "0" {
		podName = leader + "-" + worker
		sts = leader
	}
	base := []podOpt{
		label(LWSNameLabel, lws), label(LWSGroupIndexLabel, group), label(LWSWorkerIndexLabel, worker),
		controller("apps/v1", "StatefulSet", sts, "sts-uid-"+sts),
	}
	if worker != "0" {
		base = append(base, ann(LWSLeaderNameAnnotation, leader))
	}
	return pod(podName, append(base, opts...)...)
}

func owner(apiVersion, kind, n, uid string) *metav1.OwnerReference {
	return &metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: n, UID: types.UID(uid)}
}

func TestImplicitGang(t *testing.T) {
	tests := []struct {
		name string
		pod  *v1.Pod
		// want.Name is checked for its readable prefix only (the rest is a hash).
		want       Implicit
		wantOK     bool
		wantErr    []string
		namePrefix string
	}{
		{
			name:   "no annotation: no implicit gang",
			pod:    pod("p", controller("batch/v1", "Job", "train", "u1")),
			wantOK: false,
		},
		{
			name:       "indexed Job: one gang per Job, owned by it",
			pod:        pod("train-0-x", ann(size, "8"), label("batch.kubernetes.io/job-completion-index", "0"), controller("batch/v1", "Job", "train", "u1")),
			wantOK:     true,
			namePrefix: "train-",
			want:       Implicit{MinMember: 8, Workload: "Job train", Owner: owner("batch/v1", "Job", "train", "u1")},
		},
		{
			name:       "PyTorchJob (training-operator v1): master and workers in one gang, owned by the job",
			pod:        pod("bert-worker-3", ann(size, " 4 "), label("training.kubeflow.org/replica-type", "worker"), controller("kubeflow.org/v1", "PyTorchJob", "bert", "u2")),
			wantOK:     true,
			namePrefix: "bert-",
			want:       Implicit{MinMember: 4, Workload: "PyTorchJob bert", Owner: owner("kubeflow.org/v1", "PyTorchJob", "bert", "u2")},
		},
		{
			name:       "RayCluster (KubeRay): head and workers in one gang",
			pod:        pod("rc-worker-gpu-abcde", ann(size, "5"), label("ray.io/cluster", "rc"), label("ray.io/node-type", "worker"), controller("ray.io/v1", "RayCluster", "rc", "u3")),
			wantOK:     true,
			namePrefix: "rc-",
			want:       Implicit{MinMember: 5, Workload: "RayCluster rc", Owner: owner("ray.io/v1", "RayCluster", "rc", "u3")},
		},
		{
			name:       "JobSet: whole JobSet by default, owned by the JobSet",
			pod:        jobSetPod("llm-workers-1-0", "llm", "workers", "1", ann(size, "9")),
			wantOK:     true,
			namePrefix: "llm-",
			want:       Implicit{MinMember: 9, Workload: "JobSet llm", Owner: owner(JobSetAPIVersion, "JobSet", "llm", "js-uid-llm")},
		},
		{
			name:       "JobSet gang-scope workload is the default",
			pod:        jobSetPod("llm-driver-0-0", "llm", "driver", "0", ann(size, "9"), ann(scope, "workload")),
			wantOK:     true,
			namePrefix: "llm-",
			want:       Implicit{MinMember: 9, Workload: "JobSet llm", Owner: owner(JobSetAPIVersion, "JobSet", "llm", "js-uid-llm")},
		},
		{
			name:       "JobSet gang-scope replicated-job",
			pod:        jobSetPod("llm-workers-1-0", "llm", "workers", "1", ann(size, "8"), ann(scope, "replicated-job")),
			wantOK:     true,
			namePrefix: "llm-workers-",
			want:       Implicit{MinMember: 8, Workload: "JobSet llm (replicated job workers)", Owner: owner(JobSetAPIVersion, "JobSet", "llm", "js-uid-llm")},
		},
		{
			name:       "JobSet gang-scope job: each child Job, owned by the Job",
			pod:        jobSetPod("llm-workers-1-0", "llm", "workers", "1", ann(size, "4"), ann(scope, "job")),
			wantOK:     true,
			namePrefix: "llm-workers-1-",
			want:       Implicit{MinMember: 4, Workload: "JobSet llm (Job llm-workers-1)", Owner: owner("batch/v1", "Job", "llm-workers-1", "job-uid-llm-workers-1")},
		},
		{
			name:       "LeaderWorkerSet leader: one gang per group, owned by the leader pod",
			pod:        lwsPod("vllm", "2", "0", ann(size, "4")),
			wantOK:     true,
			namePrefix: "vllm-2-",
			want:       Implicit{MinMember: 4, Workload: "LeaderWorkerSet vllm (group 2)", Owner: owner("v1", "Pod", "vllm-2", "uid-vllm-2")},
		},
		{
			name:       "LeaderWorkerSet worker: same gang, owner is the leader pod by name",
			pod:        lwsPod("vllm", "2", "3", ann(size, "4")),
			wantOK:     true,
			namePrefix: "vllm-2-",
			want:       Implicit{MinMember: 4, Workload: "LeaderWorkerSet vllm (group 2)", OwnerPod: "vllm-2"},
		},
		{
			name:   "bare pod with gang-name: owned by the pod",
			pod:    pod("solo-1", ann(size, "3"), ann(name, "solo")),
			wantOK: true,
			want:   Implicit{Name: "solo", MinMember: 3, Workload: "gang-name solo", Owner: owner("v1", "Pod", "solo-1", "uid-solo-1")},
		},
		{
			name:   "gang-name over a Job: named gang, owned by the Job",
			pod:    pod("a-0", ann(size, "6"), ann(name, "pair"), controller("batch/v1", "Job", "a", "ua")),
			wantOK: true,
			want:   Implicit{Name: "pair", MinMember: 6, Workload: "gang-name pair", Owner: owner("batch/v1", "Job", "a", "ua")},
		},
		{
			name:   "gang-name over a JobSet pod: owned by the JobSet",
			pod:    jobSetPod("x", "llm", "workers", "0", ann(size, "6"), ann(name, "pair")),
			wantOK: true,
			want:   Implicit{Name: "pair", MinMember: 6, Workload: "gang-name pair", Owner: owner(JobSetAPIVersion, "JobSet", "llm", "js-uid-llm")},
		},
		{
			name:    "gang-size not a number",
			pod:     pod("p", ann(size, "eight"), controller("batch/v1", "Job", "train", "u1")),
			wantOK:  true,
			wantErr: []string{size, `"eight"`},
		},
		{
			name:    "gang-size zero",
			pod:     pod("p", ann(size, "0"), controller("batch/v1", "Job", "train", "u1")),
			wantOK:  true,
			wantErr: []string{size, `"0"`},
		},
		{
			name:    "gang-size negative",
			pod:     pod("p", ann(size, "-2"), controller("batch/v1", "Job", "train", "u1")),
			wantOK:  true,
			wantErr: []string{size, `"-2"`},
		},
		{
			name:    "gang-size overflows int32",
			pod:     pod("p", ann(size, "4294967296"), controller("batch/v1", "Job", "train", "u1")),
			wantOK:  true,
			wantErr: []string{size, `"4294967296"`},
		},
		{
			name:    "gang-size empty",
			pod:     pod("p", ann(size, ""), controller("batch/v1", "Job", "train", "u1")),
			wantOK:  true,
			wantErr: []string{size, `""`},
		},
		{
			name:    "bare pod without gang-name",
			pod:     pod("p", ann(size, "2")),
			wantOK:  true,
			wantErr: []string{size, `"2"`, name},
		},
		{
			name:    "invalid gang-name",
			pod:     pod("p", ann(size, "2"), ann(name, "Not_A_Name")),
			wantOK:  true,
			wantErr: []string{name, `"Not_A_Name"`},
		},
		{
			name:    "gang-name longer than a label value",
			pod:     pod("p", ann(size, "2"), ann(name, strings.Repeat("a", 64))),
			wantOK:  true,
			wantErr: []string{name, strings.Repeat("a", 64)},
		},
		{
			name:    "unknown gang-scope",
			pod:     jobSetPod("x", "llm", "workers", "0", ann(size, "2"), ann(scope, "slice")),
			wantOK:  true,
			wantErr: []string{scope, `"slice"`},
		},
		{
			name:    "gang-scope replicated-job outside a JobSet",
			pod:     pod("p", ann(size, "2"), ann(scope, "replicated-job"), controller("batch/v1", "Job", "train", "u1")),
			wantOK:  true,
			wantErr: []string{scope, `"replicated-job"`, JobSetNameLabel},
		},
		{
			name:    "LeaderWorkerSet pod without a group index",
			pod:     pod("p", ann(size, "2"), label(LWSNameLabel, "vllm"), controller("apps/v1", "StatefulSet", "vllm", "u")),
			wantOK:  true,
			wantErr: []string{size, LWSGroupIndexLabel},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, err := ImplicitGang(tt.pod)
			if ok != tt.wantOK {
				t.Fatalf("ok = %v, want %v", ok, tt.wantOK)
			}
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("no error, want one naming %q", tt.wantErr)
				}
				for _, part := range tt.wantErr {
					if !strings.Contains(err.Error(), part) {
						t.Errorf("error %q does not name %q", err, part)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if !ok {
				return
			}
			if errs := validation.IsDNS1123Label(got.Name); len(errs) > 0 {
				t.Errorf("name %q is not a DNS-1123 label: %v", got.Name, errs)
			}
			if tt.namePrefix != "" {
				if !strings.HasPrefix(got.Name, tt.namePrefix) || len(got.Name) != len(tt.namePrefix)+8 {
					t.Errorf("name %q, want %q followed by an 8-character hash", got.Name, tt.namePrefix)
				}
				tt.want.Name = got.Name
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ImplicitGang (-want +got):\n%s", diff)
			}
		})
	}
}

// TestImplicitGangGrouping: members of one unit share a gang name; distinct
// units never do.
func TestImplicitGangGrouping(t *testing.T) {
	nameOf := func(p *v1.Pod) string {
		t.Helper()
		g, ok, err := ImplicitGang(p)
		if err != nil || !ok {
			t.Fatalf("pod %s: ok=%v err=%v", p.Name, ok, err)
		}
		return g.Name
	}
	job := func(podName, jobName, uid string) *v1.Pod {
		return pod(podName, ann(size, "2"), controller("batch/v1", "Job", jobName, uid))
	}
	same := [][2]*v1.Pod{
		{job("train-0", "train", "u1"), job("train-1", "train", "u1")},
		{jobSetPod("a", "llm", "driver", "0", ann(size, "9")), jobSetPod("b", "llm", "workers", "1", ann(size, "9"))},
		{jobSetPod("a", "llm", "workers", "0", ann(size, "8"), ann(scope, "replicated-job")), jobSetPod("b", "llm", "workers", "1", ann(size, "8"), ann(scope, "replicated-job"))},
		{lwsPod("vllm", "1", "0", ann(size, "4")), lwsPod("vllm", "1", "3", ann(size, "4"))},
		{pod("x", ann(size, "2"), ann(name, "g")), job("y", "other", "u9")},
	}
	same[4][1].Annotations[name] = "g"
	for i, pair := range same {
		if a, b := nameOf(pair[0]), nameOf(pair[1]); a != b {
			t.Errorf("case %d: %s and %s in different gangs %q and %q", i, pair[0].Name, pair[1].Name, a, b)
		}
	}
	different := [][2]*v1.Pod{
		// Two Jobs; a Job and a RayCluster of one name; a Job recreated
		// under its old name (new UID).
		{job("a-0", "a", "u1"), job("b-0", "b", "u2")},
		{job("t-0", "t", "u1"), pod("t-head", ann(size, "2"), controller("ray.io/v1", "RayCluster", "t", "u1"))},
		{job("t-0", "t", "u1"), job("t-0", "t", "u2")},
		// Names that join to the same readable string.
		{jobSetPod("a", "a", "b-c", "0", ann(size, "2"), ann(scope, "replicated-job")), jobSetPod("b", "a-b", "c", "0", ann(size, "2"), ann(scope, "replicated-job"))},
		{jobSetPod("a", "llm", "workers", "0", ann(size, "4"), ann(scope, "job")), jobSetPod("b", "llm", "workers", "1", ann(size, "4"), ann(scope, "job"))},
		{lwsPod("vllm", "1", "0", ann(size, "4")), lwsPod("vllm", "2", "0", ann(size, "4"))},
		// A JobSet and a Job of the same name.
		{jobSetPod("a", "llm", "w", "0", ann(size, "2")), job("b", "llm", "js-uid-llm")},
	}
	for i, pair := range different {
		if a, b := nameOf(pair[0]), nameOf(pair[1]); a == b {
			t.Errorf("case %d: %s and %s share gang %q", i, pair[0].Name, pair[1].Name, a)
		}
	}
}

func TestGangNameBounded(t *testing.T) {
	long := strings.Repeat("very-long-name.", 20)[:250]
	p := pod("p", ann(size, "2"), controller("example.com/v1", "Trainer", long, "u"))
	g, _, err := ImplicitGang(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Name) > 63 || len(validation.IsDNS1123Label(g.Name)) > 0 {
		t.Fatalf("name %q (%d characters) is not a DNS-1123 label", g.Name, len(g.Name))
	}
	// Two long names that differ only past the cut stay apart.
	q := pod("q", ann(size, "2"), controller("example.com/v1", "Trainer", long[:249]+"x", "u"))
	h, _, _ := ImplicitGang(q)
	if g.Name == h.Name {
		t.Fatalf("long names collide: %q", g.Name)
	}
	if got := gangName("___", "k", "___", "", ""); len(validation.IsDNS1123Label(got)) > 0 {
		t.Fatalf("name %q of an unreadable workload is not a DNS-1123 label", got)
	}
}

func TestPodGroupFor(t *testing.T) {
	p := pod("train-0", controller("batch/v1", "Job", "train", "u1"),
		ann(size, "8"),
		label(phalanxv1alpha1.QueueLabel, "team-a"),
		label("unrelated", "x"),
		ann(phalanxv1alpha1.TopologyRequiredAnnotation, "ib-cluster"),
		ann(phalanxv1alpha1.TopologyPreferredAnnotation, "leaf"),
		ann(phalanxv1alpha1.DependsOnAnnotation, "prepare"),
		ann("unrelated", "y"))
	g, _, err := ImplicitGang(p)
	if err != nil {
		t.Fatal(err)
	}
	got := PodGroupFor(p, g)
	want := &pgv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{
			Name: g.Name, Namespace: "team-a",
			Labels: map[string]string{phalanxv1alpha1.ManagedByLabel: phalanxv1alpha1.ManagedByValue, phalanxv1alpha1.QueueLabel: "team-a"},
			Annotations: map[string]string{
				phalanxv1alpha1.TopologyRequiredAnnotation:  "ib-cluster",
				phalanxv1alpha1.TopologyPreferredAnnotation: "leaf",
				phalanxv1alpha1.DependsOnAnnotation:         "prepare",
			},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "train", UID: "u1"}},
		},
		Spec: pgv1alpha1.PodGroupSpec{MinMember: 8},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("PodGroupFor (-want +got):\n%s", diff)
	}

	// No queue, no topology, no owner (LWS worker): only what there is.
	w := lwsPod("vllm", "0", "1", ann(size, "2"))
	gw, _, _ := ImplicitGang(w)
	pg := PodGroupFor(w, gw)
	if len(pg.OwnerReferences) != 0 || pg.Annotations != nil || len(pg.Labels) != 1 {
		t.Errorf("PodGroup of an LWS worker: %+v", pg.ObjectMeta)
	}
}

func TestAddOwner(t *testing.T) {
	pg := &pgv1alpha1.PodGroup{}
	a := metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: "a", UID: "ua"}
	b := metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: "b", UID: "ub"}
	if !AddOwner(pg, a) || AddOwner(pg, a) || !AddOwner(pg, b) || AddOwner(pg, b) {
		t.Fatalf("AddOwner changed the wrong times: %+v", pg.OwnerReferences)
	}
	if len(pg.OwnerReferences) != 2 {
		t.Fatalf("owners %+v, want a and b", pg.OwnerReferences)
	}
}

func TestGangOf(t *testing.T) {
	job := controller("batch/v1", "Job", "train", "u1")
	withGroup := func(n string) podOpt {
		return func(p *v1.Pod) { p.Spec.SchedulingGroup = &v1.PodSchedulingGroup{PodGroupName: ptr.To(n)} }
	}
	tests := []struct {
		name    string
		pod     *v1.Pod
		want    Source
		wantPG  string
		wantErr bool
	}{
		{name: "none", pod: pod("p", job), want: SourceNone},
		{name: "label", pod: pod("p", job, label(pgv1alpha1.PodGroupLabel, "pg")), want: SourcePodGroupLabel, wantPG: "pg"},
		{name: "label wins over the rest", pod: pod("p", job, label(pgv1alpha1.PodGroupLabel, "pg"), withGroup("up"), ann(size, "2")), want: SourcePodGroupLabel, wantPG: "pg"},
		{name: "Workload API", pod: pod("p", job, withGroup("up")), want: SourceWorkloadAPI, wantPG: "up"},
		{name: "Workload API wins over the annotation", pod: pod("p", job, withGroup("up"), ann(size, "2")), want: SourceWorkloadAPI, wantPG: "up"},
		{name: "implicit", pod: pod("p", job, ann(size, "2")), want: SourceImplicit},
		{name: "bad annotation", pod: pod("p", job, ann(size, "x")), want: SourceNone, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ref, err := GangOf(tt.pod)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if ref.Source != tt.want {
				t.Fatalf("source %v, want %v", ref.Source, tt.want)
			}
			if tt.wantPG != "" && ref.Name != tt.wantPG {
				t.Fatalf("PodGroup %q, want %q", ref.Name, tt.wantPG)
			}
			if tt.want == SourceImplicit && (ref.Implicit == nil || ref.Implicit.Name != ref.Name || ref.Namespace != "team-a") {
				t.Fatalf("implicit ref %+v", ref)
			}
		})
	}
}

func TestFromUpstream(t *testing.T) {
	podGroup := func(mod func(*schedulingv1beta1.PodGroup)) *schedulingv1beta1.PodGroup {
		pg := &schedulingv1beta1.PodGroup{
			ObjectMeta: metav1.ObjectMeta{Name: "train-workers", Namespace: "team-a"},
			Spec: schedulingv1beta1.PodGroupSpec{
				WorkloadRef: &schedulingv1beta1.WorkloadReference{
					WorkloadName: "train", TemplateName: "workers"},
				SchedulingPolicy: schedulingv1beta1.PodGroupSchedulingPolicy{Gang: &schedulingv1beta1.GangSchedulingPolicy{MinCount: 5}},
			},
		}
		if mod != nil {
			mod(pg)
		}
		return pg
	}
	wl := &schedulingv1beta1.Workload{
		ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "team-a",
			Labels:      map[string]string{phalanxv1alpha1.QueueLabel: "wl-queue"},
			Annotations: map[string]string{phalanxv1alpha1.TopologyPreferredAnnotation: "leaf"}},
		Spec: schedulingv1beta1.WorkloadSpec{PodGroupTemplates: []schedulingv1beta1.PodGroupTemplate{
			{Name: "driver", Priority: ptr.To[int32](1)},
			{Name: "workers", Priority: ptr.To[int32](100)},
		}},
	}
	tests := []struct {
		name    string
		pg      *schedulingv1beta1.PodGroup
		wl      *schedulingv1beta1.Workload
		want    UpstreamGang
		wantOK  bool
		wantErr string
	}{
		{
			name:   "gang without constraints or workload",
			pg:     podGroup(nil),
			wantOK: true,
			want:   UpstreamGang{Namespace: "team-a", Name: "train-workers", MinCount: 5, Workload: "train"},
		},
		{
			name: "basic policy is not a gang",
			pg: podGroup(func(pg *schedulingv1beta1.PodGroup) {
				pg.Spec.SchedulingPolicy = schedulingv1beta1.PodGroupSchedulingPolicy{Basic: &schedulingv1beta1.BasicSchedulingPolicy{}}
			}),
			wantOK: false,
		},
		{
			name: "topology key, queue, priority and annotations of the PodGroup",
			pg: podGroup(func(pg *schedulingv1beta1.PodGroup) {
				pg.Labels = map[string]string{phalanxv1alpha1.QueueLabel: "pg-queue"}
				pg.Annotations = map[string]string{phalanxv1alpha1.TopologyRequiredAnnotation: "ib-cluster"}
				pg.Spec.Priority = ptr.To[int32](7)
				pg.Spec.SchedulingConstraints = &schedulingv1beta1.PodGroupSchedulingConstraints{
					Topology: []schedulingv1beta1.TopologyConstraint{{Key: "network.example.com/ib-cluster"}}}
			}),
			wl:     wl,
			wantOK: true,
			want: UpstreamGang{Namespace: "team-a", Name: "train-workers", MinCount: 5, Workload: "train",
				TopologyKeys: []string{"network.example.com/ib-cluster"}, TopologyRequired: "ib-cluster",
				TopologyPreferred: "leaf", Queue: "pg-queue", Priority: ptr.To[int32](7)},
		},
		{
			name:   "queue, annotations and priority from the Workload",
			pg:     podGroup(nil),
			wl:     wl,
			wantOK: true,
			want: UpstreamGang{Namespace: "team-a", Name: "train-workers", MinCount: 5, Workload: "train",
				TopologyPreferred: "leaf", Queue: "wl-queue", Priority: ptr.To[int32](100)},
		},
		{
			name: "a Workload the PodGroup does not reference is ignored",
			pg: podGroup(func(pg *schedulingv1beta1.PodGroup) {
				pg.Spec.WorkloadRef.WorkloadName = "other"
			}),
			wl:     wl,
			wantOK: true,
			want:   UpstreamGang{Namespace: "team-a", Name: "train-workers", MinCount: 5, Workload: "other"},
		},
		{
			name: "minCount 0",
			pg: podGroup(func(pg *schedulingv1beta1.PodGroup) {
				pg.Spec.SchedulingPolicy.Gang.MinCount = 0
			}),
			wantOK:  true,
			wantErr: "spec.schedulingPolicy.gang.minCount: 0",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, err := FromUpstream(tt.pg, tt.wl)
			if ok != tt.wantOK {
				t.Fatalf("ok = %v, want %v", ok, tt.wantOK)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("FromUpstream (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTopologyLevelFor(t *testing.T) {
	levels := []phalanxv1alpha1.TopologyLevel{
		{Name: "ib-cluster", NodeLabel: "network.example.com/ib-cluster"},
		{Name: "host", NodeLabel: v1.LabelHostname},
	}
	if l, adHoc := TopologyLevelFor("network.example.com/ib-cluster", levels); adHoc || l.Name != "ib-cluster" {
		t.Errorf("known key: level %+v adHoc %v, want ib-cluster", l, adHoc)
	}
	if l, adHoc := TopologyLevelFor("topology.kubernetes.io/zone", levels); !adHoc || l.NodeLabel != "topology.kubernetes.io/zone" {
		t.Errorf("unknown key: level %+v adHoc %v, want an ad-hoc level of that label", l, adHoc)
	}
	if _, adHoc := TopologyLevelFor(v1.LabelHostname, nil); !adHoc {
		t.Errorf("no NetworkTopology: want an ad-hoc level")
	}
}
