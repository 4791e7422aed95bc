// Package estimator answers Karmada's scheduler-estimator for one member
// cluster: how many whole sets of a workload's components, or how many
// replicas, fit there now. Answers are dry runs of phalanx's own planner on
// the member's live state (the Planner port); nothing is held or changed.
package estimator

import (
	"context"
	"fmt"
	"maps"
	"math"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/phalanx-sched/phalanx/internal/estimator/karmadapb"
	"github.com/phalanx-sched/phalanx/internal/gang"
)

// Question is one dry run: how many whole copies of Members fit, after the
// Assumed workloads took their room.
type Question struct {
	// Members are one set: every component's replicas, as pods that do not
	// exist (same namespace, labels and annotations as the workload's).
	Members []*v1.Pod
	// Assumed are Karmada's in-flight placements to this cluster.
	Assumed [][]*v1.Pod
}

// Planner is the port to the member's scheduler: the whole-gang planner's
// dry run over the scheduler's filters and state.
type Planner interface {
	Copies(ctx context.Context, q Question) (gang.Answer, error)
}

// Template is what phalanx reads from a workload's resource template: the
// labels and annotations of the object and of its pod templates.
type Template struct {
	Labels      map[string]string
	Annotations map[string]string
}

// Templates finds the resource template a call is about, by the kind and
// namespace/name Karmada sends in the gRPC metadata key "object".
type Templates interface {
	Template(ctx context.Context, kind, namespace, name string) (*Template, error)
}

// Unschedulable counts a workload's pods that have been unschedulable
// longer than threshold (Karmada's descheduler asks).
type Unschedulable interface {
	Unschedulable(ctx context.Context, ref *karmadapb.ObjectReference, threshold time.Duration) (int, error)
}

// Server serves Karmada's Estimator gRPC service.
type Server struct {
	karmadapb.UnimplementedEstimatorServer
	// Cluster is this member's name in Karmada; calls for another cluster
	// are refused (a Service pointing at the wrong estimator).
	Cluster       string
	Planner       Planner
	Templates     Templates // nil: no template is read
	Unschedulable Unschedulable
}

// Register adds the service to a gRPC server.
func (s *Server) Register(g *grpc.Server) {
	registerMetrics()
	karmadapb.RegisterEstimatorServer(g, s)
}

// MaxAvailableComponentSets: complete sets of all components that fit
// together, each set placed as one gang.
func (s *Server) MaxAvailableComponentSets(ctx context.Context, req *karmadapb.MaxAvailableComponentSetsRequest) (resp *karmadapb.MaxAvailableComponentSetsResponse, err error) {
	defer observe("MaxAvailableComponentSets", time.Now(), &err)
	if err := s.checkCluster(req.GetCluster()); err != nil {
		return nil, err
	}
	tmpl := s.template(ctx)
	members, err := MemberPods(req.GetNamespace(), req.GetComponents(), tmpl)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	ans, err := s.ask(ctx, members, req.GetAssumedWorkloads(), tmpl)
	if err != nil {
		return nil, err
	}
	return &karmadapb.MaxAvailableComponentSetsResponse{MaxSets: clamp(ans.Copies)}, nil
}

// MaxAvailableReplicas: single replicas that fit.
func (s *Server) MaxAvailableReplicas(ctx context.Context, req *karmadapb.MaxAvailableReplicasRequest) (resp *karmadapb.MaxAvailableReplicasResponse, err error) {
	defer observe("MaxAvailableReplicas", time.Now(), &err)
	if err := s.checkCluster(req.GetCluster()); err != nil {
		return nil, err
	}
	rr := req.GetReplicaRequirements()
	one := []*karmadapb.Component{{Name: "replica", Replicas: 1, ReplicaRequirements: &karmadapb.ComponentReplicaRequirements{
		NodeClaim: rr.GetNodeClaim(), PriorityClassName: rr.GetPriorityClassName(), ResourceRequestBytes: rr.GetResourceRequestBytes(),
	}}}
	tmpl := s.template(ctx)
	members, err := MemberPods(rr.GetNamespace(), one, tmpl)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, "replicaRequirements: "+err.Error())
	}
	ans, err := s.ask(ctx, members, req.GetAssumedWorkloads(), tmpl)
	if err != nil {
		return nil, err
	}
	return &karmadapb.MaxAvailableReplicasResponse{MaxReplicas: clamp(ans.Copies)}, nil
}

// GetUnschedulableReplicas: the workload's pods unschedulable for longer
// than the threshold.
func (s *Server) GetUnschedulableReplicas(ctx context.Context, req *karmadapb.UnschedulableReplicasRequest) (resp *karmadapb.UnschedulableReplicasResponse, err error) {
	defer observe("GetUnschedulableReplicas", time.Now(), &err)
	if err := s.checkCluster(req.GetCluster()); err != nil {
		return nil, err
	}
	if req.GetResource() == nil {
		return nil, status.Error(codes.InvalidArgument, "resource: required")
	}
	if s.Unschedulable == nil {
		return nil, status.Error(codes.Unimplemented, "this estimator does not count unschedulable replicas")
	}
	n, err := s.Unschedulable.Unschedulable(ctx, req.GetResource(), time.Duration(req.GetUnschedulableThreshold()))
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &karmadapb.UnschedulableReplicasResponse{UnschedulableReplicas: clamp(n)}, nil
}

func (s *Server) checkCluster(cluster string) error {
	if s.Cluster != "" && cluster != "" && cluster != s.Cluster {
		return status.Errorf(codes.InvalidArgument, "cluster: this estimator serves member %q, not %q (check the Service karmada-scheduler-estimator-%s)", s.Cluster, cluster, cluster)
	}
	return nil
}

func (s *Server) ask(ctx context.Context, members []*v1.Pod, assumed []*karmadapb.AssumedWorkload, tmpl *Template) (gang.Answer, error) {
	q := Question{Members: members}
	for i, w := range assumed {
		pods, err := MemberPods(w.GetNamespace(), w.GetComponents(), nil)
		if err != nil {
			return gang.Answer{}, status.Errorf(codes.InvalidArgument, "assumedWorkloads[%d]: %v", i, err)
		}
		if len(pods) > 0 {
			q.Assumed = append(q.Assumed, pods)
		}
	}
	if len(members) == 0 {
		return gang.Answer{}, nil
	}
	ans, err := s.Planner.Copies(ctx, q)
	if err != nil {
		return gang.Answer{}, status.Error(codes.Unavailable, err.Error())
	}
	klog.FromContext(ctx).V(3).Info("Estimated", "namespace", members[0].Namespace, "members", len(members),
		"assumed", len(q.Assumed), "copies", ans.Copies, "why", ans.Why, "template", tmpl != nil)
	return ans, nil
}

// template reads the workload's template named in the call's metadata; nil
// when there is none or it cannot be read (the answer then applies no
// topology requirement and the namespace's queue).
func (s *Server) template(ctx context.Context) *Template {
	kind, ns, name, ok := ObjectOf(ctx)
	if s.Templates == nil {
		// Warned of at start; every call answered blind counts.
		templateMisses.Inc()
		klog.FromContext(ctx).V(4).Info("No Karmada kubeconfig; answering without the workload's template", "kind", kind, "namespace", ns, "name", name)
		return nil
	}
	if !ok {
		return nil
	}
	t, err := s.Templates.Template(ctx, kind, ns, name)
	if err != nil {
		templateMisses.Inc()
		klog.FromContext(ctx).Info("Cannot read the workload's template; answering without its phalanx labels and annotations",
			"kind", kind, "namespace", ns, "name", name, "err", err)
		return nil
	}
	return t
}

// ObjectOf parses the gRPC metadata key "object" karmada-scheduler sends:
// "kind=<Kind>, name=<namespace>/<name>".
func ObjectOf(ctx context.Context) (kind, namespace, name string, ok bool) {
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get("object") {
		for part := range strings.SplitSeq(v, ",") {
			k, val, _ := strings.Cut(strings.TrimSpace(part), "=")
			switch k {
			case "kind":
				kind = val
			case "name":
				if ns, n, found := strings.Cut(val, "/"); found {
					namespace, name = ns, n
				} else {
					name = val
				}
			}
		}
	}
	return kind, namespace, name, kind != "" && name != ""
}

// MemberPods turns one set of components into the pods that would be
// created: requests, node selector, required node affinity, tolerations and
// priority class from the request; labels and annotations from the template.
func MemberPods(namespace string, components []*karmadapb.Component, tmpl *Template) ([]*v1.Pod, error) {
	var pods []*v1.Pod
	for ci, c := range components {
		base, err := podOf(namespace, c.GetReplicaRequirements(), tmpl)
		if err != nil {
			return nil, fmt.Errorf("components[%d] (%s): %w", ci, c.GetName(), err)
		}
		if c.GetReplicas() < 0 {
			return nil, fmt.Errorf("components[%d] (%s): replicas: %d is negative", ci, c.GetName(), c.GetReplicas())
		}
		for i := range int(c.GetReplicas()) {
			p := base.DeepCopy()
			p.Name = fmt.Sprintf("karmada-estimate-%s-%d", strings.ToLower(c.GetName()), i)
			p.UID = ""
			pods = append(pods, p)
		}
	}
	return pods, nil
}

func podOf(namespace string, rr *karmadapb.ComponentReplicaRequirements, tmpl *Template) (*v1.Pod, error) {
	if namespace == "" {
		namespace = metav1.NamespaceDefault
	}
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace},
		Spec: v1.PodSpec{
			PriorityClassName: rr.GetPriorityClassName(),
			Containers:        []v1.Container{{Name: "main", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{}}}},
		},
	}
	if tmpl != nil {
		p.Labels, p.Annotations = maps.Clone(tmpl.Labels), maps.Clone(tmpl.Annotations)
	}
	for name, raw := range rr.GetResourceRequestBytes() {
		var q resource.Quantity
		if err := q.Unmarshal(raw); err != nil {
			return nil, fmt.Errorf("resourceRequestBytes[%s]: %w", name, err)
		}
		if q.Sign() < 0 {
			return nil, fmt.Errorf("resourceRequestBytes[%s]: %s is negative", name, q.String())
		}
		p.Spec.Containers[0].Resources.Requests[v1.ResourceName(name)] = q
	}
	nc := rr.GetNodeClaim()
	if nc == nil {
		return p, nil
	}
	p.Spec.NodeSelector = maps.Clone(nc.GetNodeSelector())
	if raw := nc.GetNodeAffinityBytes(); len(raw) > 0 {
		sel := &v1.NodeSelector{}
		if err := sel.Unmarshal(raw); err != nil {
			return nil, fmt.Errorf("nodeClaim.nodeAffinityBytes: %w", err)
		}
		p.Spec.Affinity = &v1.Affinity{NodeAffinity: &v1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: sel}}
	}
	for i, raw := range nc.GetTolerationsBytes() {
		var t v1.Toleration
		if err := t.Unmarshal(raw); err != nil {
			return nil, fmt.Errorf("nodeClaim.tolerationsBytes[%d]: %w", i, err)
		}
		p.Spec.Tolerations = append(p.Spec.Tolerations, t)
	}
	return p, nil
}

func clamp(n int) int32 {
	return int32(min(n, math.MaxInt32))
}
