package numa

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/phalanx-sched/phalanx/internal/resources"
)

// rl builds a ResourceList from name/quantity pairs.
func rl(kv ...string) v1.ResourceList {
	out := v1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

// guaranteed is a container with requests == limits.
func guaranteed(name string, kv ...string) v1.Container {
	return v1.Container{Name: name, Resources: v1.ResourceRequirements{Requests: rl(kv...), Limits: rl(kv...)}}
}

// limitsOnly is a container with limits and no requests (API defaulting
// would copy them).
func limitsOnly(name string, kv ...string) v1.Container {
	return v1.Container{Name: name, Resources: v1.ResourceRequirements{Limits: rl(kv...)}}
}

// requestsOnly is a container with requests and no limits.
func requestsOnly(name string, kv ...string) v1.Container {
	return v1.Container{Name: name, Resources: v1.ResourceRequirements{Requests: rl(kv...)}}
}

func sidecar(c v1.Container) v1.Container {
	always := v1.ContainerRestartPolicyAlways
	c.RestartPolicy = &always
	return c
}

func podOf(cs ...v1.Container) *v1.Pod {
	return &v1.Pod{Spec: v1.PodSpec{Containers: cs}}
}

func withInit(p *v1.Pod, cs ...v1.Container) *v1.Pod {
	p.Spec.InitContainers = cs
	return p
}

func TestNeedsAlignment(t *testing.T) {
	cases := []struct {
		name       string
		pod        *v1.Pod
		guaranteed bool
		needs      bool
		aligned    []resources.List // container scope, per app container
	}{
		{name: "best-effort pod with a GPU", pod: podOf(limitsOnly("c", "nvidia.com/gpu", "1")),
			needs: true, aligned: []resources.List{{gpu: 1}}},
		{name: "burstable pod without devices", pod: podOf(requestsOnly("c", "cpu", "2", "memory", "1Gi")),
			needs: false},
		{name: "burstable pod: only the GPU is aligned", pod: podOf(v1.Container{Name: "c", Resources: v1.ResourceRequirements{
			Requests: rl("cpu", "4", "memory", "8Gi", "nvidia.com/gpu", "2"), Limits: rl("cpu", "8", "memory", "8Gi", "nvidia.com/gpu", "2")}}),
			needs: true, aligned: []resources.List{{gpu: 2}}},
		{name: "guaranteed integral cpu", pod: podOf(guaranteed("c", "cpu", "4", "memory", "8Gi")),
			guaranteed: true, needs: true, aligned: []resources.List{{v1.ResourceCPU: 4000, v1.ResourceMemory: 8 * gi}}},
		{name: "guaranteed fractional cpu: memory only", pod: podOf(guaranteed("c", "cpu", "1500m", "memory", "2Gi")),
			guaranteed: true, needs: true, aligned: []resources.List{{v1.ResourceMemory: 2 * gi}}},
		{name: "guaranteed by limits only (requests default to limits)", pod: podOf(limitsOnly("c", "cpu", "2", "memory", "1Gi", "hugepages-2Mi", "64Mi")),
			guaranteed: true, needs: true, aligned: []resources.List{{v1.ResourceCPU: 2000, v1.ResourceMemory: gi, "hugepages-2Mi": 64 << 20}}},
		{name: "one container without memory limit spoils Guaranteed", pod: podOf(guaranteed("a", "cpu", "2", "memory", "1Gi"), guaranteed("b", "cpu", "2")),
			needs: false},
		{name: "init container counts for QoS", pod: withInit(podOf(guaranteed("a", "cpu", "2", "memory", "1Gi")), requestsOnly("i", "cpu", "1")),
			needs: false},
		{name: "native and non-device resources are not aligned", pod: podOf(limitsOnly("c", "ephemeral-storage", "1Gi", "example.kubernetes.io/thing", "1", "cpu", "1", "memory", "1Gi")),
			guaranteed: true, needs: true, aligned: []resources.List{{v1.ResourceCPU: 1000, v1.ResourceMemory: gi}}},
		{name: "QoS from status wins", pod: func() *v1.Pod {
			p := podOf(guaranteed("c", "cpu", "2", "memory", "1Gi"))
			p.Status.QOSClass = v1.PodQOSBurstable
			return p
		}(), needs: false},
		{name: "pod-level resources decide QoS", pod: func() *v1.Pod {
			p := podOf(v1.Container{Name: "c"}, limitsOnly("d", "example.com/nic", "1"))
			p.Spec.Resources = &v1.ResourceRequirements{Requests: rl("cpu", "2", "memory", "1Gi"), Limits: rl("cpu", "2", "memory", "1Gi")}
			return p
		}(), guaranteed: true, needs: true, aligned: []resources.List{{"example.com/nic": 1}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if g := IsGuaranteed(tc.pod); g != tc.guaranteed {
				t.Errorf("IsGuaranteed = %v, want %v", g, tc.guaranteed)
			}
			if got := NeedsAlignment(tc.pod); got != tc.needs {
				t.Errorf("NeedsAlignment = %v, want %v", got, tc.needs)
			}
			var got []resources.List
			for _, u := range AlignedRequests(tc.pod, Container) {
				got = append(got, u.Request)
			}
			if !reflect.DeepEqual(got, tc.aligned) {
				t.Errorf("AlignedRequests = %v, want %v", got, tc.aligned)
			}
		})
	}
}

func TestAlignedRequestsScopes(t *testing.T) {
	// A regular init container of 6 GPUs, a sidecar of 1 GPU, then a regular
	// init container of 2 GPUs (runs beside the sidecar), then app containers
	// of 2 and 1 GPUs.
	pod := withInit(podOf(limitsOnly("app1", "nvidia.com/gpu", "2"), limitsOnly("app2", "nvidia.com/gpu", "1"), v1.Container{Name: "plain"}),
		limitsOnly("init1", "nvidia.com/gpu", "6"), sidecar(limitsOnly("side", "nvidia.com/gpu", "1")), limitsOnly("init2", "nvidia.com/gpu", "2"))

	want := []Unit{
		{Name: "init1", Init: true, Request: resources.List{gpu: 6}},
		{Name: "side", Init: true, Request: resources.List{gpu: 1}, Hold: resources.List{gpu: 1}},
		{Name: "init2", Init: true, Request: resources.List{gpu: 2}},
		{Name: "app1", Request: resources.List{gpu: 2}, Hold: resources.List{gpu: 2}},
		{Name: "app2", Request: resources.List{gpu: 1}, Hold: resources.List{gpu: 1}},
	}
	got := AlignedRequests(pod, Container)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("container scope:\n got %+v\nwant %+v", got, want)
	}
	if !got[0].Transient() || got[1].Transient() || got[3].Transient() {
		t.Fatalf("Transient wrong: %+v", got)
	}

	// Pod scope: peak max(6, 1+2, 1+2+1) = 6, held 1+2+1 = 4.
	wantPod := []Unit{{Request: resources.List{gpu: 6}, Hold: resources.List{gpu: 4}}}
	if got := AlignedRequests(pod, Pod); !reflect.DeepEqual(got, wantPod) {
		t.Fatalf("pod scope:\n got %+v\nwant %+v", got, wantPod)
	}

	// Pod scope, running phase larger than the init phase.
	pod = withInit(podOf(limitsOnly("a", "nvidia.com/gpu", "3"), limitsOnly("b", "nvidia.com/gpu", "3")), limitsOnly("i", "nvidia.com/gpu", "4"))
	wantPod = []Unit{{Request: resources.List{gpu: 6}, Hold: resources.List{gpu: 6}}}
	if got := AlignedRequests(pod, Pod); !reflect.DeepEqual(got, wantPod) {
		t.Fatalf("pod scope:\n got %+v\nwant %+v", got, wantPod)
	}

	if got := AlignedRequests(podOf(requestsOnly("c", "cpu", "1")), Pod); got != nil {
		t.Fatalf("pod without aligned resources: got %+v", got)
	}
}
