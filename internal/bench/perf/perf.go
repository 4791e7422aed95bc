// Package perf writes the benchmark workloads as a config of upstream's
// scheduler_perf, and holds the hooks test/schedperf needs on its API
// servers, so both engines run the same objects.
package perf

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	"sigs.k8s.io/yaml"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/bench"
	"github.com/phalanx-sched/phalanx/internal/bench/schedproc"
	"github.com/phalanx-sched/phalanx/internal/testcluster"
	"github.com/phalanx-sched/phalanx/manifests"
)

// Upstream's scheduler_perf (k8s.io/kubernetes/test/integration/scheduler_perf)
// runs each test case on its own etcd, API server and in-process scheduler,
// creates nodes, then pods while it samples scheduled pods once a second; its
// SchedulingThroughput is the average of those samples. Render writes the
// workloads of internal/bench as a scheduler_perf config, so both engines run
// the same objects.

// Namespace is where scheduler_perf creates a test case's measured pods.
const Namespace = "bench"

// TestCase names the scheduler_perf test case of a workload and scheduler.
func TestCase(w bench.Workload, s bench.Scheduler) string { return w.Name + "_" + string(s) }

// WorkloadName names the single workload of a test case.
func WorkloadName(w bench.Workload) string {
	if w.GangSize > 0 {
		return fmt.Sprintf("%dNodes_%dx%d", w.Nodes, w.Gangs, w.GangSize)
	}
	return fmt.Sprintf("%dNodes_%dPods", w.Nodes, w.Pods)
}

// UpstreamThresholds are scheduler_perf's published minimum throughputs
// (pods/s, upstream CI machines) for workloads of the same shape, v1.36.3
// misc/performance-config.yaml.
var UpstreamThresholds = map[string]float64{"plain-pods": 270}

type perfOp map[string]any

type perfTestCase struct {
	Name                string         `json:"name"`
	FeatureGates        map[string]any `json:"featureGates,omitempty"`
	SchedulerConfigPath string         `json:"schedulerConfigPath"`
	WorkloadTemplate    []perfOp       `json:"workloadTemplate"`
	Workloads           []perfWorkload `json:"workloads"`
}

type perfWorkload struct {
	Name   string         `json:"name"`
	Labels []string       `json:"labels"`
	Params map[string]any `json:"params"`
}

// Render writes performance-config.yaml and its templates into dir and
// returns the config's path.
func Render(dir string, workloads []bench.Workload) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	write := func(name string, data []byte) (string, error) {
		p := filepath.Join(dir, name)
		return p, os.WriteFile(p, data, 0o644)
	}
	var cases []perfTestCase
	for _, w := range workloads {
		if w.Devices > 0 || w.SubGroupSize > 0 || w.Mix != nil {
			// Side by side only: the DRA workload needs slices, claim
			// templates and the resourceclaim controller; the sub-group
			// workload a second phalanx row, per-pod rank labels and
			// upstream's CompositePodGroups (v1alpha3); a mixed workload
			// gangs of many sizes, which one pod template cannot index.
			continue
		}
		nodeTmpl, err := nodeTemplate(w)
		if err != nil {
			return "", err
		}
		nodePath, err := write(w.Name+"-node.yaml", nodeTmpl)
		if err != nil {
			return "", err
		}
		for _, s := range w.Schedulers() {
			tc := perfTestCase{Name: TestCase(w, s)}
			cfg, err := perfSchedulerConfig(s)
			if err != nil {
				return "", err
			}
			if tc.SchedulerConfigPath, err = write(tc.Name+"-scheduler.yaml", cfg); err != nil {
				return "", err
			}
			if s == bench.UpstreamGang {
				tc.FeatureGates = map[string]any{}
				for _, g := range bench.UpstreamGates {
					tc.FeatureGates[g] = true
				}
			}
			tc.WorkloadTemplate = append(tc.WorkloadTemplate, perfOp{"opcode": "createNodes", "countParam": "$nodes", "nodeTemplatePath": nodePath})
			objects, err := objects(w, s)
			if err != nil {
				return "", err
			}
			for i, o := range objects {
				p, err := write(fmt.Sprintf("%s-object-%d.yaml", tc.Name, i), o.template)
				if err != nil {
					return "", err
				}
				op := perfOp{"opcode": "createAny", "templatePath": p, "count": o.count}
				if o.namespaced {
					op["namespace"] = Namespace
				}
				tc.WorkloadTemplate = append(tc.WorkloadTemplate, op)
			}
			podTmpl, err := podTemplate(w, s)
			if err != nil {
				return "", err
			}
			podPath, err := write(tc.Name+"-pod.yaml", podTmpl)
			if err != nil {
				return "", err
			}
			tc.WorkloadTemplate = append(tc.WorkloadTemplate, perfOp{
				"opcode": "createPods", "countParam": "$pods", "podTemplatePath": podPath,
				"namespace": Namespace, "collectMetrics": true,
			})
			tc.Workloads = []perfWorkload{{Name: WorkloadName(w), Labels: []string{"performance", w.Name}, Params: map[string]any{"nodes": w.Nodes, "pods": w.Total()}}}
			cases = append(cases, tc)
		}
	}
	raw, err := yaml.Marshal(cases)
	if err != nil {
		return "", err
	}
	return write("performance-config.yaml", raw)
}

// perfSchedulerConfig is the scheduler config of a test case. scheduler_perf
// takes the profiles from it (its own client has QPS 5000).
func perfSchedulerConfig(s bench.Scheduler) ([]byte, error) {
	config := bench.StockConfig
	if s == bench.Phalanx {
		config = manifests.SchedulerConfig
	}
	return schedproc.Config(config, s.SchedulerName(), false)
}

// nodeTemplate is Node(i) with {{.Index}} where i goes.
func nodeTemplate(w bench.Workload) ([]byte, error) {
	node := w.Node(0).Node()
	node.Name = "node-{{.Index}}"
	node.Labels[v1.LabelHostname] = "node-{{.Index}}"
	if w.Topology {
		node.Labels[bench.IBLabel] = fmt.Sprintf("ib-{{DivideInt .Index %d}}", bench.IBSize)
		node.Labels[bench.LeafLabel] = fmt.Sprintf("leaf-{{DivideInt .Index %d}}", bench.LeafSize)
	}
	node.Status.Conditions[0].LastHeartbeatTime = node.CreationTimestamp
	return yaml.Marshal(node)
}

// gangTemplate is the name of the gang of pod or gang {{.Index}}.
func gangTemplate(w bench.Workload, perPod bool) string {
	if perPod {
		return fmt.Sprintf("gang-{{DivideInt .Index %d}}", w.GangSize)
	}
	return "gang-{{.Index}}"
}

// podTemplate is Pod(s, i) with {{.Index}} where i goes.
func podTemplate(w bench.Workload, s bench.Scheduler) ([]byte, error) {
	pod := w.Pod(s, "", 0)
	pod.Name, pod.Namespace, pod.GenerateName = "", "", "pod-"
	if w.GangSize > 0 {
		gang := gangTemplate(w, true)
		pod.Labels[pgv1alpha1.PodGroupLabel] = gang
		if pod.Spec.SchedulingGroup != nil {
			pod.Spec.SchedulingGroup.PodGroupName = &gang
		}
	}
	return yaml.Marshal(pod)
}

type perfObject struct {
	template   []byte
	count      int
	namespaced bool
}

// objects are the createAny objects of a test case, in creation order.
func objects(w bench.Workload, s bench.Scheduler) ([]perfObject, error) {
	var out []perfObject
	add := func(obj any, count int, namespaced bool) error {
		raw, err := yaml.Marshal(obj)
		if err != nil {
			return err
		}
		// Names are templated per object; creationTimestamp: null is not
		// accepted by strict field validation of custom resources.
		text := strings.ReplaceAll(string(raw), "creationTimestamp: null\n", "")
		out = append(out, perfObject{template: []byte(text), count: count, namespaced: namespaced})
		return nil
	}
	if s == bench.Phalanx && w.Topology {
		if err := add(typed(bench.NetworkTopology(), "scheduling.phalanx.dev/v1alpha1", "NetworkTopology"), 1, false); err != nil {
			return nil, err
		}
	}
	if s == bench.Phalanx {
		for q := 0; q < w.Queues; q++ {
			if err := add(typed(bench.Queue(q), "scheduling.phalanx.dev/v1alpha1", "Queue"), 1, false); err != nil {
				return nil, err
			}
		}
	}
	if w.GangSize == 0 {
		return out, nil
	}
	gang := gangTemplate(w, false)
	switch s {
	case bench.Phalanx:
		pg := w.PodGroup("", 0)
		pg.Name, pg.Namespace = gang, ""
		if w.Queues > 0 {
			pg.Labels = map[string]string{phalanxv1alpha1.QueueLabel: fmt.Sprintf("queue-{{Mod .Index %d}}", w.Queues)}
		}
		if err := add(typed(pg, "scheduling.x-k8s.io/v1alpha1", "PodGroup"), w.Gangs, true); err != nil {
			return nil, err
		}
	case bench.UpstreamGang:
		wl := w.UpstreamWorkload("", 0)
		wl.Name, wl.Namespace = gang, ""
		pg := w.UpstreamPodGroup("", 0)
		pg.Name, pg.Namespace = gang, ""
		pg.Spec.WorkloadRef.WorkloadName = gang
		if err := add(wl, w.Gangs, true); err != nil {
			return nil, err
		}
		if err := add(pg, w.Gangs, true); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// typed marshals an object with its apiVersion and kind, which typed Go
// objects of CRDs leave empty.
func typed(obj any, apiVersion, kind string) map[string]any {
	raw, _ := yaml.Marshal(obj)
	var m map[string]any
	_ = yaml.Unmarshal(raw, &m)
	m["apiVersion"], m["kind"] = apiVersion, kind
	delete(m, "status")
	return m
}

var crdsInstalled sync.Map // API server host → error (nil once installed)

// InstallCRDs installs manifests/crds on the API server of cfg, once per
// server. scheduler_perf starts the scheduler before any hook of the
// benchmark can create objects, and phalanx's plugins need their CRDs
// served when they are built, so test/schedperf calls this from its plugin
// factories.
func InstallCRDs(ctx context.Context, cfg *rest.Config) error {
	if err, ok := crdsInstalled.Load(cfg.Host); ok {
		if err == nil {
			return nil
		}
		return err.(error)
	}
	c, err := clusterFor(cfg)
	if err != nil {
		return err
	}
	err = c.InstallCRDs(ctx)
	if err == nil {
		crdsInstalled.Store(cfg.Host, nil)
	}
	return err
}

// PublishNRTs creates a NodeResourceTopology object with policy none for
// each node, as the side-by-side engine does (Workload.Node).
func PublishNRTs(ctx context.Context, cfg *rest.Config, nodes []v1.Node) error {
	c, err := clusterFor(cfg)
	if err != nil {
		return err
	}
	return bench.Parallel(ctx, len(nodes), func(i int) error {
		n := nodes[i]
		zone := testcluster.ZoneSpec{Name: "node-0", CPU: n.Status.Capacity.Cpu().String(), Memory: n.Status.Capacity.Memory().String()}
		if gpus, ok := n.Status.Capacity[testcluster.GPU]; ok {
			zone.GPUs = gpus.Value()
		}
		return c.CreateNRT(ctx, n.Name, "none", "container", zone)
	})
}

// clusterFor wraps an API server's client config in the harness's Cluster
// type, for its CRD and NRT helpers.
func clusterFor(cfg *rest.Config) (*testcluster.Cluster, error) {
	c := &testcluster.Cluster{Config: rest.CopyConfig(cfg)}
	c.CRDConfig = rest.CopyConfig(cfg)
	c.CRDConfig.ContentType = "application/json"
	c.CRDConfig.AcceptContentTypes = "application/json"
	var err error
	c.Client, err = kubernetes.NewForConfig(c.Config)
	return c, err
}
