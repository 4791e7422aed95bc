package estimator

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

// resourceBindings are Karmada's bindings: one per resource template,
// named <name>-<lowercased kind>, holding the template's apiVersion.
var resourceBindings = schema.GroupVersionResource{Group: "work.karmada.io", Version: "v1alpha2", Resource: "resourcebindings"}

// Read from a template: the queue label, the dependencies (phalanx-global
// reads them), the topology and the sub-group annotations. Gang annotations are not: a dry run's members form one gang
// by construction.
var (
	templateLabels      = []string{phalanxv1alpha1.QueueLabel}
	templateAnnotations = []string{phalanxv1alpha1.DependsOnAnnotation, phalanxv1alpha1.TopologyRequiredAnnotation, phalanxv1alpha1.TopologyPreferredAnnotation,
		phalanxv1alpha1.SubGroupSizeAnnotation, phalanxv1alpha1.SubGroupMinAnnotation,
		phalanxv1alpha1.SubGroupTopologyRequiredAnnotation, phalanxv1alpha1.SubGroupTopologyPreferredAnnotation}
)

// KarmadaTemplates reads resource templates from the Karmada API server:
// the ResourceBinding of the object a call names gives the template's
// apiVersion, then the template itself is read.
type KarmadaTemplates struct {
	client dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper

	// Karmada asks every member on each scheduling attempt: a template read
	// is kept for a few seconds, so a burst of attempts reads it once.
	mu     sync.Mutex
	recent map[string]cachedTemplate
	now    func() time.Time
}

type cachedTemplate struct {
	t  *Template
	at time.Time
}

// templateTTL is how long a template read is reused.
const templateTTL = 5 * time.Second

// NewKarmadaTemplates reads templates with the given Karmada API server
// credentials (read access to resourcebindings and the workload kinds).
func NewKarmadaTemplates(cfg *rest.Config) (*KarmadaTemplates, error) {
	cfg = rest.CopyConfig(cfg)
	// client-go's default (5 QPS) would make calls wait for each other.
	cfg.QPS, cfg.Burst = 50, 100
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &KarmadaTemplates{client: client, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc)),
		recent: map[string]cachedTemplate{}, now: time.Now}, nil
}

// Template implements Templates.
func (k *KarmadaTemplates) Template(ctx context.Context, kind, namespace, name string) (*Template, error) {
	key := kind + "/" + namespace + "/" + name
	now := k.now()
	k.mu.Lock()
	c, ok := k.recent[key]
	for key, c := range k.recent {
		if now.Sub(c.at) > templateTTL {
			delete(k.recent, key)
		}
	}
	k.mu.Unlock()
	if ok && now.Sub(c.at) <= templateTTL {
		return c.t, nil
	}
	t, err := k.read(ctx, kind, namespace, name)
	if err != nil {
		return nil, err
	}
	k.mu.Lock()
	k.recent[key] = cachedTemplate{t: t, at: now}
	k.mu.Unlock()
	return t, nil
}

func (k *KarmadaTemplates) read(ctx context.Context, kind, namespace, name string) (*Template, error) {
	rb, err := k.client.Resource(resourceBindings).Namespace(namespace).Get(ctx, name+"-"+strings.ToLower(kind), metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("ResourceBinding of %s %s/%s: %w", kind, namespace, name, err)
	}
	apiVersion, _, _ := unstructured.NestedString(rb.Object, "spec", "resource", "apiVersion")
	t, err := k.Of(ctx, apiVersion, kind, namespace, name)
	if err != nil {
		return nil, fmt.Errorf("ResourceBinding %s/%s: %w", namespace, rb.GetName(), err)
	}
	return t, nil
}

// Of reads the template of the given apiVersion and kind (not cached).
func (k *KarmadaTemplates) Of(ctx context.Context, apiVersion, kind, namespace, name string) (*Template, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, fmt.Errorf("spec.resource.apiVersion: %w", err)
	}
	mapping, err := k.mapper.RESTMapping(gv.WithKind(kind).GroupKind(), gv.Version)
	if err != nil {
		k.mapper.Reset()
		return nil, fmt.Errorf("kind %s of %s: %w", kind, apiVersion, err)
	}
	obj, err := k.client.Resource(mapping.Resource).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return TemplateOf(obj.Object), nil
}

// TemplateOf collects the phalanx labels and annotations of an object and of
// every pod template in it (any "template" with "metadata", at any depth:
// Deployments, Jobs, JobSets, PyTorchJobs, RayClusters…). A pod template's
// value wins over the object's. Where several pod templates set a key, the
// walk is depth-first over map keys in sorted order (list items in order)
// and the last template visited wins: a template nested in another wins
// over it, and e.g. PyTorchJob's "Worker" template over its "Master".
func TemplateOf(obj map[string]any) *Template {
	t := &Template{Labels: map[string]string{}, Annotations: map[string]string{}}
	take := func(meta map[string]any) {
		pick(meta, "labels", templateLabels, t.Labels)
		pick(meta, "annotations", templateAnnotations, t.Annotations)
	}
	if meta, ok := obj["metadata"].(map[string]any); ok {
		take(meta)
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for _, key := range slices.Sorted(maps.Keys(v)) {
				child := v[key]
				if key == "template" {
					if tm, ok := child.(map[string]any); ok {
						if meta, ok := tm["metadata"].(map[string]any); ok {
							take(meta)
						}
					}
				}
				if key != "metadata" && key != "status" {
					walk(child)
				}
			}
		case []any:
			for _, child := range v {
				walk(child)
			}
		}
	}
	walk(obj["spec"])
	return t
}

func pick(meta map[string]any, field string, keys []string, into map[string]string) {
	m, _ := meta[field].(map[string]any)
	for _, k := range keys {
		if v, ok := m[k].(string); ok {
			into[k] = v
		}
	}
}
