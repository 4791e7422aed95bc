package resources

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestRequestCache(t *testing.T) {
	pod := func(rv, cpu string) *v1.Pod {
		return &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{UID: "u1", ResourceVersion: rv},
			Spec: v1.PodSpec{Containers: []v1.Container{{Resources: v1.ResourceRequirements{
				Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)},
			}}}},
		}
	}
	var c RequestCache
	first := c.Of(pod("1", "1"))
	if first[v1.ResourceCPU] != 1000 {
		t.Fatalf("cpu %d, want 1000", first[v1.ResourceCPU])
	}
	// The same version is served from the cache: the same list.
	again := c.Of(pod("1", "1"))
	again[v1.ResourceMemory] = 1 // shared: visible through first
	if _, ok := first[v1.ResourceMemory]; !ok {
		t.Errorf("the same resourceVersion was computed again, not served from the cache")
	}
	delete(first, v1.ResourceMemory)
	// A new version (an in-place resize) is computed again.
	if resized := c.Of(pod("2", "2")); resized[v1.ResourceCPU] != 2000 {
		t.Errorf("after a resize cpu %d, want 2000", resized[v1.ResourceCPU])
	}
	// A pod without a UID (a template) is never cached.
	p := pod("", "3")
	p.UID = ""
	if got := c.Of(p); got[v1.ResourceCPU] != 3000 {
		t.Errorf("uncached cpu %d, want 3000", got[v1.ResourceCPU])
	}
}
