package resources

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

const (
	gpu  v1.ResourceName = "nvidia.com/gpu"
	rdma v1.ResourceName = "rdma/hca"
	Mi                   = int64(1) << 20
	Gi                   = int64(1) << 30
)

func rl(kv ...string) v1.ResourceList {
	if len(kv)%2 != 0 {
		panic("rl needs name/quantity pairs")
	}
	out := v1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func TestFromResourceList(t *testing.T) {
	tests := []struct {
		name string
		in   v1.ResourceList
		want List
	}{
		{name: "nil", in: nil, want: List{}},
		{name: "whole cores to millicores", in: rl("cpu", "4"), want: List{v1.ResourceCPU: 4000}},
		{name: "millicores kept", in: rl("cpu", "250m"), want: List{v1.ResourceCPU: 250}},
		{name: "fractional cores", in: rl("cpu", "1.5"), want: List{v1.ResourceCPU: 1500}},
		{name: "sub-millicore CPU rounds up", in: rl("cpu", "100u"), want: List{v1.ResourceCPU: 1}},
		{name: "binary memory in bytes", in: rl("memory", "1Gi"), want: List{v1.ResourceMemory: Gi}},
		{name: "decimal memory in bytes", in: rl("memory", "2G"), want: List{v1.ResourceMemory: 2_000_000_000}},
		{name: "memory is not scaled to milli", in: rl("memory", "128Mi"), want: List{v1.ResourceMemory: 128 * Mi}},
		{name: "extended resource count", in: rl("nvidia.com/gpu", "8"), want: List{gpu: 8}},
		{name: "pods and ephemeral storage", in: rl("pods", "110", "ephemeral-storage", "10Gi"), want: List{v1.ResourcePods: 110, v1.ResourceEphemeralStorage: 10 * Gi}},
		{name: "hugepages", in: rl("hugepages-2Mi", "1Gi"), want: List{"hugepages-2Mi": Gi}},
		{name: "explicit zero is kept", in: rl("nvidia.com/gpu", "0"), want: List{gpu: 0}},
		{
			name: "mixed",
			in:   rl("cpu", "2", "memory", "4Gi", "nvidia.com/gpu", "1", "rdma/hca", "2"),
			want: List{v1.ResourceCPU: 2000, v1.ResourceMemory: 4 * Gi, gpu: 1, rdma: 2},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := FromResourceList(tc.in); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("FromResourceList(%v) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

func ctr(name string, req v1.ResourceList) v1.Container {
	return v1.Container{Name: name, Resources: v1.ResourceRequirements{Requests: req}}
}

func sidecar(name string, req v1.ResourceList) v1.Container {
	c := ctr(name, req)
	always := v1.ContainerRestartPolicyAlways
	c.RestartPolicy = &always
	return c
}

func TestPodRequests(t *testing.T) {
	tests := []struct {
		name string
		spec v1.PodSpec
		want List
	}{
		{
			name: "no requests",
			spec: v1.PodSpec{Containers: []v1.Container{ctr("a", nil)}},
			want: List{},
		},
		{
			name: "limits alone are not requests (defaulting happens in the API server)",
			spec: v1.PodSpec{Containers: []v1.Container{{Name: "a", Resources: v1.ResourceRequirements{Limits: rl("cpu", "1")}}}},
			want: List{},
		},
		{
			name: "single container",
			spec: v1.PodSpec{Containers: []v1.Container{ctr("a", rl("cpu", "500m", "memory", "1Gi"))}},
			want: List{v1.ResourceCPU: 500, v1.ResourceMemory: Gi},
		},
		{
			name: "containers are summed, extended resources too",
			spec: v1.PodSpec{Containers: []v1.Container{
				ctr("a", rl("cpu", "1", "memory", "1Gi", "nvidia.com/gpu", "2")),
				ctr("b", rl("cpu", "500m", "nvidia.com/gpu", "2", "rdma/hca", "1")),
			}},
			want: List{v1.ResourceCPU: 1500, v1.ResourceMemory: Gi, gpu: 4, rdma: 1},
		},
		{
			name: "init container larger than the sum wins",
			spec: v1.PodSpec{
				InitContainers: []v1.Container{ctr("init", rl("cpu", "4", "memory", "8Gi"))},
				Containers:     []v1.Container{ctr("a", rl("cpu", "1", "memory", "1Gi")), ctr("b", rl("cpu", "1", "memory", "1Gi"))},
			},
			want: List{v1.ResourceCPU: 4000, v1.ResourceMemory: 8 * Gi},
		},
		{
			name: "init container smaller than the sum is ignored",
			spec: v1.PodSpec{
				InitContainers: []v1.Container{ctr("init", rl("cpu", "1"))},
				Containers:     []v1.Container{ctr("a", rl("cpu", "1")), ctr("b", rl("cpu", "1"))},
			},
			want: List{v1.ResourceCPU: 2000},
		},
		{
			name: "max is per resource, over the largest init container",
			spec: v1.PodSpec{
				InitContainers: []v1.Container{
					ctr("i1", rl("cpu", "3", "memory", "100Mi")),
					ctr("i2", rl("cpu", "500m", "memory", "4Gi", "nvidia.com/gpu", "1")),
				},
				Containers: []v1.Container{ctr("a", rl("cpu", "2", "memory", "1Gi"))},
			},
			want: List{v1.ResourceCPU: 3000, v1.ResourceMemory: 4 * Gi, gpu: 1},
		},
		{
			name: "sidecar is added to the containers and to later init containers",
			spec: v1.PodSpec{
				InitContainers: []v1.Container{
					sidecar("proxy", rl("cpu", "500m", "memory", "256Mi")),
					ctr("migrate", rl("cpu", "2", "memory", "128Mi")),
				},
				Containers: []v1.Container{ctr("a", rl("cpu", "1", "memory", "1Gi"))},
			},
			// containers+sidecar = 1500m / 1280Mi; migrate while proxy runs = 2500m / 384Mi.
			want: List{v1.ResourceCPU: 2500, v1.ResourceMemory: 1280 * Mi},
		},
		{
			name: "init container before the sidecar does not include it",
			spec: v1.PodSpec{
				InitContainers: []v1.Container{
					ctr("setup", rl("cpu", "2")),
					sidecar("proxy", rl("cpu", "500m")),
				},
				Containers: []v1.Container{ctr("a", rl("cpu", "1"))},
			},
			// max(setup 2000, containers+sidecar 1500).
			want: List{v1.ResourceCPU: 2000},
		},
		{
			name: "overhead is added on top",
			spec: v1.PodSpec{
				Containers: []v1.Container{ctr("a", rl("cpu", "1", "memory", "1Gi"))},
				Overhead:   rl("cpu", "250m", "memory", "120Mi"),
			},
			want: List{v1.ResourceCPU: 1250, v1.ResourceMemory: Gi + 120*Mi},
		},
		{
			name: "overhead is added after the init-container max",
			spec: v1.PodSpec{
				InitContainers: []v1.Container{ctr("init", rl("cpu", "3"))},
				Containers:     []v1.Container{ctr("a", rl("cpu", "1"))},
				Overhead:       rl("cpu", "100m"),
			},
			want: List{v1.ResourceCPU: 3100},
		},
		{
			name: "pod-level requests replace cpu and memory, extended resources stay per container",
			spec: v1.PodSpec{
				Resources:  &v1.ResourceRequirements{Requests: rl("cpu", "4", "memory", "2Gi")},
				Containers: []v1.Container{ctr("a", rl("cpu", "1", "memory", "1Gi", "nvidia.com/gpu", "1"))},
				Overhead:   rl("cpu", "100m"),
			},
			want: List{v1.ResourceCPU: 4100, v1.ResourceMemory: 2 * Gi, gpu: 1},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pod := &v1.Pod{Spec: tc.spec}
			if got := PodRequests(pod); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("PodRequests = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCopies(t *testing.T) {
	tests := []struct {
		name  string
		free  List
		req   List
		limit int64
		want  int64
	}{
		{name: "limited by CPU", free: List{v1.ResourceCPU: 8000, v1.ResourceMemory: 64 * Gi}, req: List{v1.ResourceCPU: 2000, v1.ResourceMemory: Gi}, limit: 100, want: 4},
		{name: "limited by memory", free: List{v1.ResourceCPU: 8000, v1.ResourceMemory: 3 * Gi}, req: List{v1.ResourceCPU: 1000, v1.ResourceMemory: Gi}, limit: 100, want: 3},
		{name: "limited by extended resource", free: List{v1.ResourceCPU: 64000, gpu: 8}, req: List{v1.ResourceCPU: 1000, gpu: 3}, limit: 100, want: 2},
		{name: "remainder is dropped", free: List{v1.ResourceCPU: 2999}, req: List{v1.ResourceCPU: 1000}, limit: 10, want: 2},
		{name: "capped at limit", free: List{v1.ResourceCPU: 64000}, req: List{v1.ResourceCPU: 1000}, limit: 5, want: 5},
		{name: "limit zero", free: List{v1.ResourceCPU: 64000}, req: List{v1.ResourceCPU: 1000}, limit: 0, want: 0},
		{name: "exact fit", free: List{gpu: 8}, req: List{gpu: 8}, limit: 10, want: 1},
		{name: "does not fit", free: List{gpu: 7}, req: List{gpu: 8}, limit: 10, want: 0},
		{name: "requested resource absent from free", free: List{v1.ResourceCPU: 8000}, req: List{v1.ResourceCPU: 1000, gpu: 1}, limit: 10, want: 0},
		{name: "empty request fits limit times", free: List{}, req: List{}, limit: 7, want: 7},
		{name: "nil request fits limit times", free: nil, req: nil, limit: 3, want: 3},
		{name: "zero requests are ignored", free: List{v1.ResourceCPU: 4000}, req: List{v1.ResourceCPU: 1000, gpu: 0}, limit: 10, want: 4},
		{name: "only zero requests fit limit times", free: List{}, req: List{gpu: 0, v1.ResourceMemory: 0}, limit: 9, want: 9},
		{name: "negative requests are ignored", free: List{v1.ResourceCPU: 4000}, req: List{v1.ResourceCPU: 1000, gpu: -2}, limit: 10, want: 4},
		{name: "negative free is zero copies", free: List{v1.ResourceCPU: -5000}, req: List{v1.ResourceCPU: 1000}, limit: 10, want: 0},
		{name: "slightly negative free is zero copies", free: List{v1.ResourceCPU: -1}, req: List{v1.ResourceCPU: 1000}, limit: 10, want: 0},
		{name: "negative free on an unrequested resource is irrelevant", free: List{v1.ResourceCPU: 4000, gpu: -1}, req: List{v1.ResourceCPU: 1000}, limit: 10, want: 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.free.Copies(tc.req, tc.limit); got != tc.want {
				t.Errorf("%v.Copies(%v, %d) = %d, want %d", tc.free, tc.req, tc.limit, got, tc.want)
			}
		})
	}
}

func TestFits(t *testing.T) {
	tests := []struct {
		name string
		free List
		req  List
		want bool
	}{
		{name: "fits with room", free: List{v1.ResourceCPU: 4000, v1.ResourceMemory: 8 * Gi}, req: List{v1.ResourceCPU: 1000, v1.ResourceMemory: Gi}, want: true},
		{name: "exact fit", free: List{v1.ResourceCPU: 1000, gpu: 2}, req: List{v1.ResourceCPU: 1000, gpu: 2}, want: true},
		{name: "one resource short", free: List{v1.ResourceCPU: 4000, gpu: 1}, req: List{v1.ResourceCPU: 1000, gpu: 2}, want: false},
		{name: "short by one unit", free: List{v1.ResourceMemory: Gi - 1}, req: List{v1.ResourceMemory: Gi}, want: false},
		{name: "absent resource counts as zero", free: List{v1.ResourceCPU: 4000}, req: List{gpu: 1}, want: false},
		{name: "zero request of an absent resource fits", free: List{v1.ResourceCPU: 4000}, req: List{gpu: 0}, want: true},
		{name: "empty request fits anything", free: List{}, req: List{}, want: true},
		{name: "nil lists", free: nil, req: nil, want: true},
		{name: "negative free does not fit a positive request", free: List{v1.ResourceCPU: -1}, req: List{v1.ResourceCPU: 1}, want: false},
		{name: "negative free on an unrequested resource is irrelevant", free: List{v1.ResourceCPU: 1000, gpu: -3}, req: List{v1.ResourceCPU: 1000}, want: true},
		{name: "negative request is ignored", free: List{}, req: List{v1.ResourceCPU: -1000}, want: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.free.Fits(tc.req); got != tc.want {
				t.Errorf("%v.Fits(%v) = %v, want %v", tc.free, tc.req, got, tc.want)
			}
		})
	}
}

func TestArithmetic(t *testing.T) {
	base := func() List { return List{v1.ResourceCPU: 4000, v1.ResourceMemory: 8 * Gi} }
	tests := []struct {
		name string
		op   func(List)
		want List
	}{
		{
			name: "Add sums and inserts new names",
			op:   func(l List) { l.Add(List{v1.ResourceCPU: 500, gpu: 2}) },
			want: List{v1.ResourceCPU: 4500, v1.ResourceMemory: 8 * Gi, gpu: 2},
		},
		{
			name: "Add nil is a no-op",
			op:   func(l List) { l.Add(nil) },
			want: List{v1.ResourceCPU: 4000, v1.ResourceMemory: 8 * Gi},
		},
		{
			name: "Sub subtracts",
			op:   func(l List) { l.Sub(List{v1.ResourceCPU: 1000, v1.ResourceMemory: Gi}) },
			want: List{v1.ResourceCPU: 3000, v1.ResourceMemory: 7 * Gi},
		},
		{
			name: "Sub can go negative and inserts missing names as negative",
			op:   func(l List) { l.Sub(List{v1.ResourceCPU: 5000, gpu: 1}) },
			want: List{v1.ResourceCPU: -1000, v1.ResourceMemory: 8 * Gi, gpu: -1},
		},
		{
			name: "Sub then Add restores",
			op: func(l List) {
				d := List{v1.ResourceCPU: 1234, gpu: 3}
				l.Sub(d)
				l.Add(d)
			},
			want: List{v1.ResourceCPU: 4000, v1.ResourceMemory: 8 * Gi, gpu: 0},
		},
		{
			name: "AddScaled by n",
			op:   func(l List) { l.AddScaled(List{v1.ResourceCPU: 500, gpu: 1}, 3) },
			want: List{v1.ResourceCPU: 5500, v1.ResourceMemory: 8 * Gi, gpu: 3},
		},
		{
			name: "AddScaled by a negative n subtracts n copies",
			op:   func(l List) { l.AddScaled(List{v1.ResourceCPU: 1000, v1.ResourceMemory: Gi}, -2) },
			want: List{v1.ResourceCPU: 2000, v1.ResourceMemory: 6 * Gi},
		},
		{
			name: "AddScaled by zero leaves amounts unchanged",
			op:   func(l List) { l.AddScaled(List{v1.ResourceCPU: 1000}, 0) },
			want: List{v1.ResourceCPU: 4000, v1.ResourceMemory: 8 * Gi},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := base()
			tc.op(l)
			if !reflect.DeepEqual(l, tc.want) {
				t.Errorf("got %v, want %v", l, tc.want)
			}
		})
	}
}

func TestAddDoesNotModifyArgument(t *testing.T) {
	l := List{v1.ResourceCPU: 1000}
	o := List{v1.ResourceCPU: 500, gpu: 1}
	l.Add(o)
	l.Sub(o)
	l.AddScaled(o, 4)
	if want := (List{v1.ResourceCPU: 500, gpu: 1}); !reflect.DeepEqual(o, want) {
		t.Errorf("argument modified: %v, want %v", o, want)
	}
}

func TestClone(t *testing.T) {
	orig := List{v1.ResourceCPU: 1000, gpu: 2}
	c := orig.Clone()
	if !reflect.DeepEqual(c, orig) {
		t.Fatalf("Clone = %v, want %v", c, orig)
	}
	c[v1.ResourceCPU] = 1
	c[v1.ResourceMemory] = 5
	if want := (List{v1.ResourceCPU: 1000, gpu: 2}); !reflect.DeepEqual(orig, want) {
		t.Errorf("modifying the clone changed the original: %v", orig)
	}
	if c := List(nil).Clone(); c == nil || len(c) != 0 {
		t.Errorf("nil.Clone() = %#v, want a usable empty list", c)
	}
}

func TestIsZero(t *testing.T) {
	tests := []struct {
		name string
		l    List
		want bool
	}{
		{name: "nil", l: nil, want: true},
		{name: "empty", l: List{}, want: true},
		{name: "explicit zeros", l: List{v1.ResourceCPU: 0, gpu: 0}, want: true},
		{name: "positive", l: List{v1.ResourceCPU: 0, gpu: 1}, want: false},
		{name: "negative", l: List{v1.ResourceMemory: -1}, want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.l.IsZero(); got != tc.want {
				t.Errorf("%v.IsZero() = %v, want %v", tc.l, got, tc.want)
			}
		})
	}
}

func TestString(t *testing.T) {
	tests := []struct {
		name string
		l    List
		want string
	}{
		{name: "nil", l: nil, want: ""},
		{name: "cpu in millicores", l: List{v1.ResourceCPU: 4000}, want: "cpu=4000m"},
		{name: "memory in bytes", l: List{v1.ResourceMemory: Gi}, want: "memory=1073741824"},
		{name: "doc example", l: List{gpu: 2, v1.ResourceCPU: 4000}, want: "cpu=4000m nvidia.com/gpu=2"},
		{
			name: "sorted by name",
			l:    List{rdma: 1, v1.ResourceMemory: 2, gpu: 3, v1.ResourceCPU: 4, v1.ResourceEphemeralStorage: 5},
			want: "cpu=4m ephemeral-storage=5 memory=2 nvidia.com/gpu=3 rdma/hca=1",
		},
		{name: "negative amounts shown, zero amounts left out", l: List{v1.ResourceCPU: -250, gpu: 0}, want: "cpu=-250m"},
		{name: "a zero amount does not change the rendering", l: List{v1.ResourceCPU: 1000, v1.ResourceMemory: 0}, want: "cpu=1000m"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Map iteration order is random: render several times.
			for i := 0; i < 20; i++ {
				if got := tc.l.String(); got != tc.want {
					t.Fatalf("String() = %q, want %q (attempt %d)", got, tc.want, i)
				}
			}
		})
	}
}

// TestStringSameForEqualLists checks the property the gang shape key relies on:
// lists with equal content render identically however they were built.
func TestStringSameForEqualLists(t *testing.T) {
	a := List{}
	for _, n := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory, gpu, rdma, "example.com/foo", "example.com/bar"} {
		a[n] = int64(len(n))
	}
	b := List{}
	for _, n := range []v1.ResourceName{"example.com/bar", rdma, "example.com/foo", gpu, v1.ResourceMemory, v1.ResourceCPU} {
		b[n] = int64(len(n))
	}
	if a.String() != b.String() {
		t.Errorf("equal lists render differently: %q vs %q", a.String(), b.String())
	}
}
