package objects

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// The fixture is a CRD the API server accepts for what the estimator reads:
// Karmada's ResourceBinding, served and stored at v1alpha2, keeping any field.
func TestResourceBindingCRD(t *testing.T) {
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(ResourceBindingCRD, &crd); err != nil {
		t.Fatalf("ResourceBindingCRD does not decode as a CRD: %v", err)
	}
	if crd.Name != "resourcebindings.work.karmada.io" || crd.Spec.Group != "work.karmada.io" ||
		crd.Spec.Names.Kind != "ResourceBinding" || crd.Spec.Scope != apiextensionsv1.NamespaceScoped {
		t.Fatalf("CRD %s: group %s kind %s scope %s, want Karmada's namespaced ResourceBinding",
			crd.Name, crd.Spec.Group, crd.Spec.Names.Kind, crd.Spec.Scope)
	}
	if len(crd.Spec.Versions) != 1 {
		t.Fatalf("%d versions, want v1alpha2 only", len(crd.Spec.Versions))
	}
	v := crd.Spec.Versions[0]
	if v.Name != "v1alpha2" || !v.Served || !v.Storage {
		t.Fatalf("version %+v, want v1alpha2 served and stored", v)
	}
	if s := v.Schema; s == nil || s.OpenAPIV3Schema == nil || s.OpenAPIV3Schema.XPreserveUnknownFields == nil || !*s.OpenAPIV3Schema.XPreserveUnknownFields {
		t.Fatal("the schema does not keep unknown fields: spec.resource would be pruned")
	}
}
