package planner

import (
	"encoding/hex"
	"encoding/json"
	"hash/fnv"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/phalanx-sched/phalanx/internal/resources"
)

// HostnameLabel is the well-known per-node topology key.
const HostnameLabel = v1.LabelHostname

// ShapeKey groups members that are interchangeable for placement: same
// requests and the same node constraints. Labels and names do not count.
func ShapeKey(pod *v1.Pod) string {
	sig := struct {
		Requests     string
		NodeSelector map[string]string             `json:",omitempty"`
		Affinity     *v1.Affinity                  `json:",omitempty"`
		Tolerations  []v1.Toleration               `json:",omitempty"`
		Spread       []v1.TopologySpreadConstraint `json:",omitempty"`
		Priority     int32
		// Claims: members asking for devices through different claim
		// entries or templates are not interchangeable.
		Claims []string `json:",omitempty"`
	}{
		Requests:     resources.PodRequests(pod).String(),
		NodeSelector: pod.Spec.NodeSelector,
		Affinity:     pod.Spec.Affinity,
		Tolerations:  pod.Spec.Tolerations,
		Spread:       pod.Spec.TopologySpreadConstraints,
		Priority:     corev1helpers.PodPriority(pod),
		Claims:       claimSignature(pod),
	}
	b, _ := json.Marshal(sig)
	h := fnv.New64a()
	_, _ = h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

// NodeAdmits is the planner's own check for members whose Filter verdict was
// not computed (shapes other than the one in the scheduling cycle): node
// selector and affinity, taints, and cordoning.
func NodeAdmits(pod *v1.Pod, node *v1.Node) bool {
	if ok, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); err != nil || !ok {
		return false
	}
	if node.Spec.Unschedulable {
		cordon := &v1.Taint{Key: v1.TaintNodeUnschedulable, Effect: v1.TaintEffectNoSchedule}
		if !corev1helpers.TolerationsTolerateTaint(klog.Background(), pod.Spec.Tolerations, cordon, false) {
			return false
		}
	}
	_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, pod.Spec.Tolerations,
		func(t *v1.Taint) bool {
			return t.Effect == v1.TaintEffectNoSchedule || t.Effect == v1.TaintEffectNoExecute
		}, false)
	return !untolerated
}

// OnePerNode reports whether the pod's required anti-affinity keeps members
// like it off each other's nodes (the common "one worker per host" rule).
func OnePerNode(pod *v1.Pod) bool {
	if pod.Spec.Affinity == nil || pod.Spec.Affinity.PodAntiAffinity == nil {
		return false
	}
	for _, term := range pod.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		if term.TopologyKey != HostnameLabel || term.LabelSelector == nil {
			continue
		}
		if len(term.Namespaces) > 0 && !contains(term.Namespaces, pod.Namespace) {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
		if err == nil && sel.Matches(labels.Set(pod.Labels)) {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// claimSignature names a pod's claim entries by template (members' own
// claims from one template are alike) or as directly named claims.
func claimSignature(pod *v1.Pod) []string {
	if len(pod.Spec.ResourceClaims) == 0 {
		return nil
	}
	out := make([]string, 0, len(pod.Spec.ResourceClaims))
	for _, c := range pod.Spec.ResourceClaims {
		switch {
		case c.ResourceClaimTemplateName != nil:
			out = append(out, c.Name+"=template:"+*c.ResourceClaimTemplateName)
		default:
			out = append(out, c.Name+"=claim")
		}
	}
	return out
}
