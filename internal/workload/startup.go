package workload

import (
	"cmp"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

// Workloads whose controllers create pods one part at a time, each part only
// after the previous one's pods are Ready. A gang spanning such parts never
// forms: phalanx starts none of its pods until minMember exist.
var (
	JobSetResource          = schema.GroupVersionResource{Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "jobsets"}
	LeaderWorkerSetResource = schema.GroupVersionResource{Group: "leaderworkerset.x-k8s.io", Version: "v1", Resource: "leaderworkersets"}
)

// Owner is a workload that created gang members and whose startup policy
// decides whether the rest of the gang can ever exist.
type Owner struct {
	// Kind is StatefulSet, JobSet or LeaderWorkerSet.
	Kind      string
	Namespace string
	Name      string
	// GangScope is the members' gang-scope annotation (JobSet only).
	GangScope string
}

func (o Owner) String() string { return o.Kind + " " + o.Namespace + "/" + o.Name }

// StartupOwners lists the workloads behind a gang's members whose startup
// policy can hold back the rest of the gang, each once, in a fixed order
// (kind, namespace, name): the first that blocks is the one a condition names.
func StartupOwners(members []*v1.Pod) []Owner {
	seen := map[Owner]bool{}
	var out []Owner
	add := func(o Owner) {
		if !seen[o] {
			seen[o] = true
			out = append(out, o)
		}
	}
	for _, p := range members {
		switch {
		case p.Labels[LWSNameLabel] != "":
			// Its StatefulSets are LWS's business: the group's policy is on the LWS.
			add(Owner{Kind: "LeaderWorkerSet", Namespace: p.Namespace, Name: p.Labels[LWSNameLabel]})
		case p.Labels[JobSetNameLabel] != "":
			add(Owner{Kind: "JobSet", Namespace: p.Namespace, Name: p.Labels[JobSetNameLabel],
				GangScope: p.Annotations[phalanxv1alpha1.GangScopeAnnotation]})
		default:
			if c := metav1.GetControllerOf(p); c != nil && c.Kind == "StatefulSet" && c.APIVersion == "apps/v1" {
				add(Owner{Kind: "StatefulSet", Namespace: p.Namespace, Name: c.Name})
			}
		}
	}
	slices.SortFunc(out, func(a, b Owner) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Namespace, b.Namespace),
			cmp.Compare(a.Name, b.Name), cmp.Compare(a.GangScope, b.GangScope))
	})
	return out
}

// OrderedStartup is a startup policy that keeps a gang from ever forming.
type OrderedStartup struct {
	Owner Owner
	// Policy is the field and value that orders the startup.
	Policy string
	// Fix says what to change.
	Fix string
}

// Message is the gang's condition message: what blocks it and the fix.
func (o OrderedStartup) Message(members, quorum int) string {
	return fmt.Sprintf("%d of %d members exist and no more will: %s starts its pods in order (%s), each part only after the previous one's pods are Ready, "+
		"but no member of a gang starts before all %d exist; %s",
		members, quorum, o.Owner, o.Policy, quorum, o.Fix)
}

// StatefulSetStartup: a StatefulSet with podManagementPolicy OrderedReady
// (the API's default) and more than one replica creates pod N+1 only after
// pod N is Running and Ready.
func StatefulSetStartup(sts *appsv1.StatefulSet) (OrderedStartup, bool) {
	if sts.Spec.PodManagementPolicy == appsv1.ParallelPodManagement {
		return OrderedStartup{}, false
	}
	if sts.Spec.Replicas != nil && *sts.Spec.Replicas <= 1 {
		return OrderedStartup{}, false
	}
	policy := sts.Spec.PodManagementPolicy
	if policy == "" {
		policy = appsv1.OrderedReadyPodManagement
	}
	return OrderedStartup{
		Owner:  Owner{Kind: "StatefulSet", Namespace: sts.Namespace, Name: sts.Name},
		Policy: "spec.podManagementPolicy: " + string(policy),
		Fix:    "set spec.podManagementPolicy: Parallel (the field is immutable: recreate the StatefulSet, e.g. kubectl delete statefulset --cascade=orphan, then apply it with the new policy)",
	}, true
}

// JobSetStartup: a JobSet with startupPolicy.startupPolicyOrder InOrder
// creates each replicated job only after the previous one is ready; a gang
// over the whole JobSet (gang-scope workload, gang-name, or a PodGroup label
// on every template) spans them.
func JobSetStartup(js *unstructured.Unstructured, gangScope string) (OrderedStartup, bool) {
	order, _, _ := unstructured.NestedString(js.Object, "spec", "startupPolicy", "startupPolicyOrder")
	if order != "InOrder" {
		return OrderedStartup{}, false
	}
	if gangScope == phalanxv1alpha1.GangScopeReplicatedJob || gangScope == phalanxv1alpha1.GangScopeJob {
		return OrderedStartup{}, false
	}
	rjobs, _, _ := unstructured.NestedSlice(js.Object, "spec", "replicatedJobs")
	if len(rjobs) < 2 {
		return OrderedStartup{}, false
	}
	return OrderedStartup{
		Owner:  Owner{Kind: "JobSet", Namespace: js.GetNamespace(), Name: js.GetName()},
		Policy: "spec.startupPolicy.startupPolicyOrder: InOrder",
		Fix: fmt.Sprintf("set spec.startupPolicy.startupPolicyOrder: AnyOrder to start the JobSet as one gang, or annotate the pod templates with %s: %s to make each replicated job a gang of its own",
			phalanxv1alpha1.GangScopeAnnotation, phalanxv1alpha1.GangScopeReplicatedJob),
	}, true
}

// LeaderWorkerSetStartup: a LeaderWorkerSet with startupPolicy LeaderReady
// creates a group's workers only after its leader is Ready; the group is one
// gang.
func LeaderWorkerSetStartup(lws *unstructured.Unstructured) (OrderedStartup, bool) {
	policy, _, _ := unstructured.NestedString(lws.Object, "spec", "startupPolicy")
	if policy != "LeaderReady" {
		return OrderedStartup{}, false
	}
	if size, found, _ := unstructured.NestedInt64(lws.Object, "spec", "leaderWorkerTemplate", "size"); found && size <= 1 {
		return OrderedStartup{}, false
	}
	return OrderedStartup{
		Owner:  Owner{Kind: "LeaderWorkerSet", Namespace: lws.GetNamespace(), Name: lws.GetName()},
		Policy: "spec.startupPolicy: LeaderReady",
		Fix:    "set spec.startupPolicy: LeaderCreated (workers are created with their leader)",
	}, true
}
