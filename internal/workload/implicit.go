// Package workload finds the gang of a pod from what the workloads people run
// put on their pods: the implicit-gang annotations (gang-size, gang-name,
// gang-scope) grouped by the owning workload, and the upstream Workload API
// (scheduling.k8s.io/v1beta1 PodGroup). It is pure logic over API objects;
// the scheduler and the controller call it so both group pods the same way.
//
// Grouping rules of an implicit gang (pod annotation gang-size: "<n>"):
//
//   - gang-name: "<name>" set: every annotated pod of the namespace with that
//     gang-name is one gang, named <name>, whatever workload owns the pods.
//   - a JobSet's pods (labels jobset.sigs.k8s.io/jobset-name and -uid): the
//     whole JobSet by default; gang-scope: replicated-job makes each replicated
//     job one gang, gang-scope: job each child Job.
//   - a LeaderWorkerSet's pods (labels leaderworkerset.sigs.k8s.io/name and
//     group-index): one gang per group (leader and its workers).
//   - any other pod with a controller owner reference: one gang per owner —
//     a batch/v1 Job (indexed or not), a RayCluster, a PyTorchJob or another
//     training-operator job, a StatefulSet, ...
//   - a pod with neither owner nor gang-name is an error: it cannot be
//     grouped with anything.
//
// gang-size is the gang's minMember; every pod of one gang carries the same
// value (for a JobSet, the total over the replicated jobs in the gang).
package workload

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

// Labels that operators put on the pods they create (their contract, read
// from sigs.k8s.io/jobset, sigs.k8s.io/lws, KubeRay and the batch/v1 Job
// controller).
const (
	JobSetNameLabel        = "jobset.sigs.k8s.io/jobset-name"
	JobSetUIDLabel         = "jobset.sigs.k8s.io/jobset-uid"
	JobSetReplicatedJobKey = "jobset.sigs.k8s.io/replicatedjob-name"
	JobSetAPIVersion       = "jobset.x-k8s.io/v1alpha2"

	LWSNameLabel        = "leaderworkerset.sigs.k8s.io/name"
	LWSGroupIndexLabel  = "leaderworkerset.sigs.k8s.io/group-index"
	LWSWorkerIndexLabel = "leaderworkerset.sigs.k8s.io/worker-index"
	// LWSLeaderNameAnnotation on a worker pod names the group's leader pod.
	LWSLeaderNameAnnotation = "leaderworkerset.sigs.k8s.io/leader-name"
)

// maxNameLength keeps implicit PodGroup names usable as label values.
const maxNameLength = validation.DNS1123LabelMaxLength

// Implicit is the gang an annotated pod belongs to.
type Implicit struct {
	// Name is the PodGroup name (DNS-1123 label, at most 63 characters).
	Name string
	// MinMember is the gang-size annotation.
	MinMember int32
	// Workload says what the pods were grouped by, for messages and events,
	// e.g. "Job train", "JobSet llm (replicated job workers)".
	Workload string
	// Owner is the object the PodGroup is garbage-collected with: the
	// top-level workload the pod names with its UID. Nil when the pod cannot
	// name it: an LWS worker (see OwnerPod), or a JobSet pod without the
	// jobset-uid label (JobSet versions before it had one).
	Owner *metav1.OwnerReference
	// OwnerPod is set when Owner is nil: the pod of the same namespace whose
	// UID owns the gang. An LWS worker pod names its group's leader pod but
	// not its UID (and the LeaderWorkerSet's UID is on no pod); the caller
	// looks the leader up, or creates the PodGroup when it sees the leader.
	OwnerPod string
}

// ImplicitGang returns the implicit gang of pod. ok is false when the pod has
// no gang-size annotation. An invalid annotation, or a pod that cannot be
// grouped, is an error whose message names the annotation and its value.
func ImplicitGang(pod *v1.Pod) (Implicit, bool, error) {
	raw, ok := pod.Annotations[phalanxv1alpha1.GangSizeAnnotation]
	if !ok {
		return Implicit{}, false, nil
	}
	size, err := parseGangSize(raw)
	if err != nil {
		return Implicit{}, true, err
	}
	scope := pod.Annotations[phalanxv1alpha1.GangScopeAnnotation]
	switch scope {
	case "", phalanxv1alpha1.GangScopeWorkload, phalanxv1alpha1.GangScopeReplicatedJob, phalanxv1alpha1.GangScopeJob:
	default:
		return Implicit{}, true, fmt.Errorf("annotation %s: %q is not one of %s, %s, %s",
			phalanxv1alpha1.GangScopeAnnotation, scope,
			phalanxv1alpha1.GangScopeWorkload, phalanxv1alpha1.GangScopeReplicatedJob, phalanxv1alpha1.GangScopeJob)
	}

	if name, named := pod.Annotations[phalanxv1alpha1.GangNameAnnotation]; named {
		if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
			return Implicit{}, true, fmt.Errorf("annotation %s: %q is not a valid gang name: %s",
				phalanxv1alpha1.GangNameAnnotation, name, strings.Join(errs, "; "))
		}
		g := Implicit{Name: name, MinMember: size, Workload: "gang-name " + name}
		// The PodGroup is owned by every member's workload (or by the bare
		// member pods): the API server deletes it when the last is gone.
		g.Owner = topLevelOwner(pod)
		if g.Owner == nil {
			g.Owner = podOwner(pod)
		}
		return g, true, nil
	}

	if js := pod.Labels[JobSetNameLabel]; js != "" {
		return jobSetGang(pod, js, scope, size)
	}
	if scope == phalanxv1alpha1.GangScopeReplicatedJob || scope == phalanxv1alpha1.GangScopeJob {
		return Implicit{}, true, fmt.Errorf("annotation %s: %q applies only to JobSet pods (label %s)",
			phalanxv1alpha1.GangScopeAnnotation, scope, JobSetNameLabel)
	}
	if lws := pod.Labels[LWSNameLabel]; lws != "" {
		return lwsGang(pod, lws, size)
	}
	ctrl := metav1.GetControllerOf(pod)
	if ctrl == nil {
		return Implicit{}, true, fmt.Errorf("annotation %s: %q on a pod that no workload owns: add annotation %s to name its gang",
			phalanxv1alpha1.GangSizeAnnotation, raw, phalanxv1alpha1.GangNameAnnotation)
	}
	owner := ownerRef(ctrl.APIVersion, ctrl.Kind, ctrl.Name, ctrl.UID)
	return Implicit{
		Name:      gangName(ctrl.Name, kindOf(ctrl.APIVersion, ctrl.Kind), ctrl.Name, "", string(ctrl.UID)),
		MinMember: size,
		Workload:  ctrl.Kind + " " + ctrl.Name,
		Owner:     owner,
	}, true, nil
}

func parseGangSize(raw string) (int32, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(raw), 10, 32)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("annotation %s: %q is not a positive integer (the number of pods that must start together)",
			phalanxv1alpha1.GangSizeAnnotation, raw)
	}
	return int32(n), nil
}

func jobSetGang(pod *v1.Pod, js, scope string, size int32) (Implicit, bool, error) {
	uid := pod.Labels[JobSetUIDLabel]
	var jobSetOwner *metav1.OwnerReference
	if uid != "" {
		jobSetOwner = ownerRef(JobSetAPIVersion, "JobSet", js, typesUID(uid))
	}
	switch scope {
	case phalanxv1alpha1.GangScopeJob:
		ctrl := metav1.GetControllerOf(pod)
		if ctrl == nil || ctrl.Kind != "Job" {
			return Implicit{}, true, fmt.Errorf("annotation %s: %q on a JobSet pod that no Job owns",
				phalanxv1alpha1.GangScopeAnnotation, scope)
		}
		return Implicit{
			Name:      gangName(ctrl.Name, "batch/Job", ctrl.Name, "", string(ctrl.UID)),
			MinMember: size,
			Workload:  "JobSet " + js + " (Job " + ctrl.Name + ")",
			Owner:     ownerRef(ctrl.APIVersion, ctrl.Kind, ctrl.Name, ctrl.UID),
		}, true, nil
	case phalanxv1alpha1.GangScopeReplicatedJob:
		rjob := pod.Labels[JobSetReplicatedJobKey]
		if rjob == "" {
			return Implicit{}, true, fmt.Errorf("annotation %s: %q on a JobSet pod without label %s",
				phalanxv1alpha1.GangScopeAnnotation, scope, JobSetReplicatedJobKey)
		}
		return Implicit{
			Name:      gangName(js+"-"+rjob, "jobset.x-k8s.io/JobSet", js, rjob, uid),
			MinMember: size,
			Workload:  "JobSet " + js + " (replicated job " + rjob + ")",
			Owner:     jobSetOwner,
		}, true, nil
	default:
		return Implicit{
			Name:      gangName(js, "jobset.x-k8s.io/JobSet", js, "", uid),
			MinMember: size,
			Workload:  "JobSet " + js,
			Owner:     jobSetOwner,
		}, true, nil
	}
}

func lwsGang(pod *v1.Pod, lws string, size int32) (Implicit, bool, error) {
	group, ok := pod.Labels[LWSGroupIndexLabel]
	if _, err := strconv.Atoi(group); !ok || err != nil {
		return Implicit{}, true, fmt.Errorf("annotation %s on a LeaderWorkerSet pod whose label %s is %q, not a group index",
			phalanxv1alpha1.GangSizeAnnotation, LWSGroupIndexLabel, group)
	}
	g := Implicit{
		Name:      gangName(lws+"-"+group, "leaderworkerset.x-k8s.io/LeaderWorkerSet", lws, group, ""),
		MinMember: size,
		Workload:  "LeaderWorkerSet " + lws + " (group " + group + ")",
	}
	// The leader pod owns the group's worker StatefulSet; owning the gang
	// too, it takes the gang with it when LWS recreates the group.
	if leader := pod.Annotations[LWSLeaderNameAnnotation]; leader != "" && leader != pod.Name {
		g.OwnerPod = leader
	} else {
		g.Owner = podOwner(pod)
	}
	return g, true, nil
}

// topLevelOwner is the workload a pod names with its UID: its JobSet, else
// its controller. Nil for a bare pod.
func topLevelOwner(pod *v1.Pod) *metav1.OwnerReference {
	if js, uid := pod.Labels[JobSetNameLabel], pod.Labels[JobSetUIDLabel]; js != "" && uid != "" {
		return ownerRef(JobSetAPIVersion, "JobSet", js, typesUID(uid))
	}
	if ctrl := metav1.GetControllerOf(pod); ctrl != nil {
		return ownerRef(ctrl.APIVersion, ctrl.Kind, ctrl.Name, ctrl.UID)
	}
	return nil
}

func podOwner(pod *v1.Pod) *metav1.OwnerReference {
	if pod.UID == "" {
		return nil
	}
	return ownerRef("v1", "Pod", pod.Name, pod.UID)
}

// gangName is readable (the workload's name) and unique per workload: a hash
// of the workload's kind, name, sub-unit and UID follows the readable part,
// so a Job and a RayCluster of the same name, or two incarnations of one Job,
// never share a PodGroup.
func gangName(readable, kind, name, sub, uid string) string {
	sum := sha256.Sum256([]byte(kind + "\x00" + name + "\x00" + sub + "\x00" + uid))
	suffix := hex.EncodeToString(sum[:])[:8]
	base := sanitize(readable)
	if max := maxNameLength - len(suffix) - 1; len(base) > max {
		base = strings.TrimRight(base[:max], "-")
	}
	if base == "" {
		return "gang-" + suffix
	}
	return base + "-" + suffix
}

// sanitize maps a name onto DNS-1123 label characters.
func sanitize(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	return strings.Trim(b.String(), "-")
}

func kindOf(apiVersion, kind string) string {
	group := apiVersion
	if i := strings.LastIndex(apiVersion, "/"); i >= 0 {
		group = apiVersion[:i]
	} else {
		group = ""
	}
	return group + "/" + kind
}
