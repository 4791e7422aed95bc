package networktopology

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/phalanx-sched/phalanx/apis/config"
	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/gang/ident"
	"github.com/phalanx-sched/phalanx/plugins/internal/plugintest"
	"github.com/phalanx-sched/phalanx/plugins/runtime"
)

const (
	ibLabel   = "example.com/ib"
	leafLabel = "example.com/leaf"
)

var networkTopology = plugintest.Plugin{
	Name: Name, Extensions: []string{"PreFilter", "PreScore", "Score"},
	New: func(ctx context.Context, h fwk.Handle, rt *runtime.Runtime) (fwk.Plugin, error) {
		return Factory(rt)(ctx, &config.NetworkTopologyArgs{TopologyName: "default"}, h)
	},
}

func topo() *phalanxv1alpha1.NetworkTopology {
	return &phalanxv1alpha1.NetworkTopology{
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: phalanxv1alpha1.NetworkTopologySpec{Levels: []phalanxv1alpha1.TopologyLevel{
			{Name: "ib", NodeLabel: ibLabel}, {Name: "leaf", NodeLabel: leafLabel},
		}},
	}
}

func node(name, ib, leaf string) *v1.Node {
	return plugintest.Node(name, "8", 0, map[string]string{ibLabel: ib, leafLabel: leaf})
}

// TestPreFilterConstraint: the gang's constraint goes to the planner through
// the cycle state, from the PodGroup's annotations or else the pod's; once
// members are placed, a required level keeps later members in their domain.
func TestPreFilterConstraint(t *testing.T) {
	required := plugintest.PodGroup("req", 2)
	required.Annotations = map[string]string{phalanxv1alpha1.TopologyRequiredAnnotation: "ib"}
	placed := plugintest.PodGroup("placed", 2)
	placed.Annotations = map[string]string{phalanxv1alpha1.TopologyRequiredAnnotation: "ib"}
	onPod := plugintest.Pod("pref-0", "pref", "1", 0)
	onPod.Annotations = map[string]string{phalanxv1alpha1.TopologyPreferredAnnotation: "leaf"}
	bound := plugintest.OnNode(plugintest.Pod("placed-0", "placed", "1", 0), "b1")
	e := plugintest.New(t, plugintest.Objects{
		Nodes:      []*v1.Node{node("a1", "ib-a", "l1"), node("a2", "ib-a", "l2"), node("b1", "ib-b", "l3"), node("b2", "ib-b", "l3")},
		Topologies: []*phalanxv1alpha1.NetworkTopology{topo()},
		PodGroups:  []*pgv1alpha1.PodGroup{required, placed, plugintest.PodGroup("pref", 1), plugintest.PodGroup("none", 1)},
		Pods:       []*v1.Pod{bound},
	}, networkTopology)
	pl := e.Plugins[Name].(*NetworkTopology)
	e.Eventually("the tree and the placed member", func() bool {
		tree, _ := pl.topo.View()
		return tree != nil && len(tree.Levels()) == 2 && len(pl.placed.PlacedNodes(ident.Ref{Namespace: "default", Name: "placed"})) == 1
	})
	for _, tc := range []struct {
		name               string
		pod                *v1.Pod
		wantSkip           bool
		wantReq, wantPref  string
		wantNodes          []string // PreFilterResult nodes; nil for all
		wantNoTopologyPart bool
	}{
		{name: "required on the PodGroup", pod: plugintest.Pod("req-0", "req", "1", 0), wantSkip: true, wantReq: "ib"},
		{name: "preferred on the pod", pod: onPod, wantSkip: true, wantPref: "leaf"},
		{name: "no constraint", pod: plugintest.Pod("none-0", "none", "1", 0), wantSkip: true},
		{name: "members placed: stay in their domain", pod: plugintest.Pod("placed-1", "placed", "1", 0), wantReq: "ib", wantNodes: []string{"b1", "b2"}},
		{name: "plain pod", pod: plugintest.Pod("plain", "", "1", 0), wantSkip: true, wantNoTopologyPart: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state := framework.NewCycleState()
			res, st := pl.PreFilter(e.Ctx, state, tc.pod, nil)
			if tc.wantSkip != st.IsSkip() {
				t.Fatalf("PreFilter status %v, want skip=%v", st, tc.wantSkip)
			}
			tc2 := Constraint(state)
			if tc.wantNoTopologyPart {
				if tc2 != nil {
					t.Fatalf("a plain pod got a topology part %+v", tc2)
				}
				return
			}
			if tc2 == nil || tc2.Required != tc.wantReq || tc2.Preferred != tc.wantPref {
				t.Fatalf("topology part %+v, want required %q preferred %q", tc2, tc.wantReq, tc.wantPref)
			}
			if tc.wantNodes == nil {
				if res != nil {
					t.Fatalf("PreFilterResult %v, want none", res.NodeNames)
				}
				return
			}
			if res == nil || res.NodeNames.Len() != len(tc.wantNodes) || !res.NodeNames.HasAll(tc.wantNodes...) {
				t.Fatalf("PreFilterResult %v, want %v", res, tc.wantNodes)
			}
		})
	}
}

// TestScore: a member prefers the narrowest domain it shares with placed
// siblings; a plain pod prefers the more used domain, leaving whole domains
// to gangs.
func TestScore(t *testing.T) {
	nodes := []*v1.Node{node("a1", "ib-a", "l1"), node("a2", "ib-a", "l2"), node("b1", "ib-b", "l3"), node("b2", "ib-b", "l4")}
	sibling := plugintest.OnNode(plugintest.Pod("g-0", "g", "1", 0), "a1")
	busy := plugintest.OnNode(plugintest.Pod("busy", "", "6", 0), "b1")
	e := plugintest.New(t, plugintest.Objects{
		Nodes: nodes, Topologies: []*phalanxv1alpha1.NetworkTopology{topo()},
		PodGroups: []*pgv1alpha1.PodGroup{plugintest.PodGroup("g", 3)},
		Pods:      []*v1.Pod{sibling, busy},
	}, networkTopology)
	pl := e.Plugins[Name].(*NetworkTopology)
	e.Eventually("the tree and the placed member", func() bool {
		tree, _ := pl.topo.View()
		return tree != nil && len(pl.placed.PlacedNodes(ident.Ref{Namespace: "default", Name: "g"})) == 1
	})
	scores := func(p *v1.Pod) map[string]int64 {
		state := framework.NewCycleState()
		var infos []fwk.NodeInfo
		for _, n := range nodes {
			infos = append(infos, e.NodeInfo(n.Name))
		}
		if st := pl.PreScore(e.Ctx, state, p, infos); !st.IsSuccess() {
			t.Fatalf("PreScore = %v", st)
		}
		out := map[string]int64{}
		for _, ni := range infos {
			s, _ := pl.Score(e.Ctx, state, p, ni)
			out[ni.Node().Name] = s
		}
		return out
	}
	member := scores(plugintest.Pod("g-1", "g", "1", 0))
	if !(member["a1"] > member["a2"] && member["a2"] > member["b1"] && member["b1"] == member["b2"]) {
		t.Fatalf("member scores %v: want a1 (same leaf) > a2 (same IB) > b* (other IB)", member)
	}
	plain := scores(plugintest.Pod("plain", "", "1", 0))
	// Leaves hold one node each, so the IB level is the packing level; ib-b
	// is the more used one.
	if !(plain["b1"] == plain["b2"] && plain["b2"] > plain["a2"]) {
		t.Fatalf("plain pod scores %v: want ib-b's nodes (the more used domain) above ib-a's", plain)
	}
}
