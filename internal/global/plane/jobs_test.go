package plane

import (
	"encoding/json"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/estimator"
	"github.com/phalanx-sched/phalanx/internal/global"
	"github.com/phalanx-sched/phalanx/internal/resources"
)

func decode(t *testing.T, js string) *binding {
	t.Helper()
	b := &binding{}
	if err := json.Unmarshal([]byte(js), b); err != nil {
		t.Fatal(err)
	}
	return b
}

const base = `{"metadata":{"name":"train-job","namespace":"ml","uid":"u1"},
 "spec":{"resource":{"apiVersion":"batch/v1","kind":"Job","name":"train","resourceVersion":"7"},
  "replicas":4,"replicaRequirements":{"resourceRequest":{"cpu":"2","nvidia.com/gpu":"1"}},"schedulerName":"phalanx-global"%s}%s}`

func withSpec(spec string) string { return strings.Replace(base, "%s}%s}", spec+"}}", 1) }
func withStatus(st, spec string) string {
	return strings.Replace(strings.Replace(base, "%s}%s}", spec+"},"+st+"}", 1), "%s", "", 1)
}

func TestJobOf(t *testing.T) {
	tmpl := &estimator.Template{Labels: map[string]string{phalanxv1alpha1.QueueLabel: "team-a"},
		Annotations: map[string]string{phalanxv1alpha1.DependsOnAnnotation: "pretrain, data-prep"}}
	j := jobOf(decode(t, withSpec("")), tmpl, map[string]string{phalanxv1alpha1.QueueLabel: "ns-queue"}, "default")
	if j.Key != "ml/train-job" || j.Name != "train" || j.Kind != "Job" || j.Queue != "team-a" {
		t.Fatalf("job %+v", j)
	}
	if want := (resources.List{"cpu": 8000, "nvidia.com/gpu": 4}); !j.Request.Fits(want) || !want.Fits(j.Request) {
		t.Fatalf("request %s, want 4 × (2 CPUs, 1 GPU)", j.Request)
	}
	if len(j.Components) != 1 || j.Components[0].Replicas != 4 || len(j.Components[0].ReplicaRequirements.ResourceRequestBytes) != 2 {
		t.Fatalf("components %v", j.Components)
	}
	var q resource.Quantity
	if err := q.Unmarshal(j.Components[0].ReplicaRequirements.ResourceRequestBytes["nvidia.com/gpu"]); err != nil || q.Value() != 1 {
		t.Fatalf("the GPU request does not round-trip: %v %v", q, err)
	}
	if strings.Join(j.DependsOn, ",") != "pretrain,data-prep" {
		t.Fatalf("depends on %v", j.DependsOn)
	}
	if j.Member != "" || j.Invalid != "" || j.Divides != "" {
		t.Fatalf("a fresh binding: %+v", j)
	}
	// Without a template label: the namespace's, then the default.
	if q := jobOf(decode(t, withSpec("")), nil, map[string]string{phalanxv1alpha1.QueueLabel: "ns-queue"}, "default").Queue; q != "ns-queue" {
		t.Fatalf("queue %s, want the namespace's", q)
	}
	if q := jobOf(decode(t, withSpec("")), nil, nil, "default").Queue; q != "default" {
		t.Fatalf("queue %s, want default", q)
	}
}

func TestJobOfComponents(t *testing.T) {
	b := decode(t, withSpec(`,"components":[{"name":"master","replicas":1,"replicaRequirements":{"resourceRequest":{"cpu":"1"}}},
		{"name":"worker","replicas":3,"replicaRequirements":{"resourceRequest":{"nvidia.com/gpu":"8"},"nodeClaim":{"nodeSelector":{"pool":"a100"}}}}]`))
	j := jobOf(b, nil, nil, "default")
	if j.Request["cpu"] != 1000 || j.Request["nvidia.com/gpu"] != 24 || len(j.Components) != 2 {
		t.Fatalf("request %s, components %d; want cpu 1 and 24 GPUs in 2 components", j.Request, len(j.Components))
	}
	if j.Components[1].ReplicaRequirements.NodeClaim.NodeSelector["pool"] != "a100" {
		t.Fatalf("node claim lost: %v", j.Components[1])
	}
}

func TestDividesAndAllowed(t *testing.T) {
	for _, tc := range []struct {
		name, placement string
		divides         string
		invalid         string
		allowed         []string
	}{
		{name: "none", placement: ``, allowed: []string{"a", "b", "c"}},
		{name: "one cluster spread", placement: `{"spreadConstraints":[{"spreadByField":"cluster","minGroups":1,"maxGroups":1}]}`, allowed: []string{"a", "b", "c"}},
		{name: "spread over two", placement: `{"spreadConstraints":[{"spreadByField":"cluster","minGroups":2}]}`, divides: "at least 2 groups by cluster"},
		{name: "spread by region", placement: `{"spreadConstraints":[{"spreadByLabel":"region","minGroups":3}]}`, divides: "by label region"},
		{name: "duplicated", placement: `{"replicaScheduling":{"replicaSchedulingType":"Duplicated"}}`, divides: "Duplicated"},
		{name: "static weights", placement: `{"replicaScheduling":{"replicaSchedulingType":"Divided","replicaDivisionPreference":"Weighted","weightPreference":{"staticWeightList":[{"weight":1},{"weight":2}]}}}`, divides: "2 weights"},
		{name: "dynamic weights", placement: `{"replicaScheduling":{"replicaSchedulingType":"Divided","replicaDivisionPreference":"Weighted","weightPreference":{"dynamicWeight":"AvailableReplicas"}}}`, allowed: []string{"a", "b", "c"}},
		{name: "names", placement: `{"clusterAffinity":{"clusterNames":["a","b"],"exclude":["b"]}}`, allowed: []string{"a"}},
		{name: "labels", placement: `{"clusterAffinity":{"labelSelector":{"matchLabels":{"gpu":"h100"}}}}`, allowed: []string{"b"}},
		{name: "first affinity group", placement: `{"clusterAffinities":[{"affinityName":"x","clusterNames":["c"]},{"clusterNames":["a"]}]}`, allowed: []string{"c"}},
		{name: "field selector", placement: `{"clusterAffinity":{"fieldSelector":{"matchExpressions":[{"key":"region","operator":"In","values":["eu"]}]}}}`, invalid: "fieldSelector is not supported"},
		{name: "bad selector", placement: `{"clusterAffinity":{"labelSelector":{"matchExpressions":[{"key":"gpu","operator":"Near"}]}}}`, invalid: "labelSelector"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := ""
			if tc.placement != "" {
				spec = `,"placement":` + tc.placement
			}
			j := jobOf(decode(t, withSpec(spec)), nil, nil, "default")
			if tc.divides == "" && j.Divides != "" || !strings.Contains(j.Divides, tc.divides) {
				t.Fatalf("divides %q, want %q", j.Divides, tc.divides)
			}
			if tc.invalid == "" && j.Invalid != "" || !strings.Contains(j.Invalid, tc.invalid) {
				t.Fatalf("invalid %q, want %q", j.Invalid, tc.invalid)
			}
			if tc.divides != "" || tc.invalid != "" {
				return
			}
			var got []string
			for _, m := range []*global.Member{{Name: "a"}, {Name: "b", Labels: map[string]string{"gpu": "h100"}}, {Name: "c"}} {
				if j.Allowed == nil || j.Allowed(m) {
					got = append(got, m.Name)
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.allowed, ",") {
				t.Fatalf("allowed %v, want %v", got, tc.allowed)
			}
		})
	}
}

func TestProgress(t *testing.T) {
	sched := `,"clusters":[{"name":"m1","replicas":4}]`
	cond := `"conditions":[{"type":"Scheduled","status":"True","reason":"Success","message":"","lastTransitionTime":"2026-12-07T12:00:00Z"}]`
	for _, tc := range []struct {
		name, agg     string
		started, done bool
	}{
		{name: "nothing yet", agg: `[]`},
		{name: "another member's status", agg: `[{"clusterName":"m2","status":{"ready":4}}]`},
		{name: "job pods pending", agg: `[{"clusterName":"m1","status":{"active":4,"ready":0}}]`},
		{name: "part ready", agg: `[{"clusterName":"m1","status":{"active":4,"ready":3}}]`},
		{name: "quorum ready", agg: `[{"clusterName":"m1","status":{"active":4,"ready":4}}]`, started: true},
		{name: "job complete", agg: `[{"clusterName":"m1","status":{"succeeded":4,"conditions":[{"type":"Complete","status":"True"}]}}]`, started: true, done: true},
		{name: "job failed", agg: `[{"clusterName":"m1","status":{"failed":1,"conditions":[{"type":"Failed","status":"True"}]}}]`, done: true},
		{name: "training-operator running", agg: `[{"clusterName":"m1","status":{"conditions":[{"type":"Created","status":"True"},{"type":"Running","status":"True"}]}}]`, started: true},
		{name: "running false", agg: `[{"clusterName":"m1","status":{"conditions":[{"type":"Running","status":"False"}]}}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := decode(t, withStatus(`"status":{`+cond+`,"aggregatedStatus":`+tc.agg+`}`, sched))
			j := jobOf(b, nil, nil, "default")
			if j.Member != "m1" || j.Since.IsZero() {
				t.Fatalf("member %q since %v", j.Member, j.Since)
			}
			if j.Started != tc.started || j.Done != tc.done {
				t.Fatalf("started %v done %v, want %v %v", j.Started, j.Done, tc.started, tc.done)
			}
		})
	}
}

func TestMemberOf(t *testing.T) {
	ready := []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue}}
	for _, tc := range []struct {
		name  string
		c     cluster
		ready bool
		cost  int64
	}{
		{name: "ready", c: cluster{}, ready: true},
		{name: "not ready", c: cluster{}, ready: false},
		{name: "NoExecute taint", c: cluster{}, ready: false},
		{name: "cost", c: cluster{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{global.CostLabel: "3"}}}, ready: true, cost: 3},
		{name: "bad cost", c: cluster{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{global.CostLabel: "-1"}}}, ready: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.c
			c.Name = "m"
			if tc.name != "not ready" {
				c.Status.Conditions = ready
			}
			if tc.name == "NoExecute taint" {
				c.Spec.Taints = []v1.Taint{{Key: "cluster.karmada.io/not-ready", Effect: v1.TaintEffectNoExecute}}
			}
			c.Status.ResourceSummary = &resourceSummary{Allocatable: v1.ResourceList{"nvidia.com/gpu": resource.MustParse("16")},
				Allocated: v1.ResourceList{"nvidia.com/gpu": resource.MustParse("4")}, Allocating: v1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}}
			m := memberOf(&c)
			if m.Ready != tc.ready || m.Cost != tc.cost || m.Allocatable["nvidia.com/gpu"] != 16 || m.InUse["nvidia.com/gpu"] != 6 {
				t.Fatalf("member %+v, want ready %v cost %d, 16 GPUs and 6 in use", m, tc.ready, tc.cost)
			}
		})
	}
}

// Karmada failover's graceful eviction tasks name the members the job may
// not go back to while they last.
func TestJobOfEvicted(t *testing.T) {
	b := decode(t, withSpec(`,"gracefulEvictionTasks":[{"fromCluster":"member-a","reason":"TaintUntolerated","producer":"TaintManager"}]`))
	j := jobOf(b, nil, nil, "default")
	if strings.Join(j.Evicted, ",") != "member-a" || j.Member != "" {
		t.Fatalf("evicted %v, member %q; want [member-a] and waiting", j.Evicted, j.Member)
	}
}
