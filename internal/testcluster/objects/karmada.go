package objects

// ResourceBindingCRD is the part of Karmada's ResourceBinding the estimator
// reads (spec.resource), so that a test cluster's API server can stand in
// for Karmada's. test/karmada runs Karmada itself.
var ResourceBindingCRD = []byte(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: resourcebindings.work.karmada.io}
spec:
  group: work.karmada.io
  names: {kind: ResourceBinding, listKind: ResourceBindingList, plural: resourcebindings, singular: resourcebinding}
  scope: Namespaced
  versions:
  - name: v1alpha2
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`)
