// Package karmada tests phalanx-scheduler's Karmada scheduler-estimator,
// and phalanx-scheduler under Karmada's real propagation flow, against
// Karmada's real components (v1.18.2), built from Karmada's Go module. It
// is a separate module: Karmada pulls dependencies phalanx does not want
// (see ../../go.mod). Karmada's commands are built by
// TestMain from the nested module ./upstream at Karmada's own dependency
// versions (k8s.io/* v0.35; with k8s.io/api v0.36 the aggregated
// apiserver does not compile) and with Karmada's own build tag
// kubernetes_protomessage_one_more_release (hack/build.sh; without it
// karmada-scheduler-estimator v1.18.2 panics decoding its first request).
// This module links phalanx's in-process harness (k8s.io/* v0.37) and
// uses Karmada's API types, clientset and PyTorchJob interpreter.
//
// What runs (TestKarmadaScheduler):
//
//   - The Karmada plane: an in-process kube-apiserver + etcd
//     (internal/testcluster) standing for karmada-apiserver, with
//     Karmada's policy and work CRDs from its chart (no conversion
//     webhook: only v1alpha2 is used) and a schema-less PyTorchJob CRD
//     for the resource templates.
//   - karmada-aggregated-apiserver (binary), on the plane's etcd, serving
//     cluster.karmada.io/v1alpha1 behind the APIService
//     v1alpha1.cluster.karmada.io, whose Service is an ExternalName to
//     127.0.0.1 (the aggregator dials externalName:port).
//   - Three members, each an in-process kube-apiserver with GPU nodes in
//     InfiniBand domains, a NetworkTopology "default", the phalanx-scheduler
//     binary scheduling and serving the estimator (TLS, client certificates
//     required, --karmada-kubeconfig to read templates from the plane), and
//     Karmada's karmada-scheduler-estimator binary.
//   - karmada-scheduler (binary) with --enable-scheduler-estimator, TLS
//     client flags, gates MultiplePodTemplatesScheduling and
//     SchedulingOvercommitProtection, leader election and metrics off. It
//     finds each member's estimator through the ExternalName Service
//     karmada-system/karmada-scheduler-estimator-<member> (port 10352,
//     targetPort the estimator's); the test repoints the Services and
//     restarts it to switch from Karmada's estimators to phalanx's.
//
// Not run in TestKarmadaScheduler, and done by the test instead:
// karmada-controller-manager's cluster status controller (the test writes
// each Cluster's Ready condition, API enablements from the member's
// discovery and resource summary from its nodes and pods), its detector
// (the test creates each
// ResourceBinding with the components Karmada's built-in PyTorchJob
// interpreter computes, and a placement of exactly one cluster:
// spreadConstraints cluster minGroups = maxGroups = 1, Divided), and the
// propagation to members (the test creates the PodGroup and pods of the
// scheduled job in the chosen member, where phalanx-scheduler binds them).
// karmada-webhook is not run either.
//
// Steps (subtests, sharing the plane and the members):
//
//   - karmada-estimator: with Karmada's own estimators, jobs that need one
//     IB domain go to member-a, the member with the most raw GPUs, where
//     no domain holds them.
//   - topology: with phalanx's, the 12-GPU job goes to member-b (the only
//     domain that holds it) and member-b's phalanx-scheduler binds it whole.
//   - fits-nowhere: a 16-GPU job no domain holds is not dispatched
//     (Scheduled=False, no clusters), retries included.
//   - race: two jobs for member-c's last room, submitted back to back: one
//     is sent, the other refused, because karmada-scheduler passes the
//     first as an assumed workload (gate SchedulingOvercommitProtection)
//     and phalanx deducts it; once the winner's pods are bound and its
//     binding (and Karmada's assumption) gone, phalanx still answers 0.
//   - estimator-down: member-c's phalanx-scheduler stopped; a binding is
//     decided at once, by Karmada's general estimator alone, since
//     Karmada v1.18.2 drops all members' gRPC answers when one call fails
//     (karmada#6815): the job goes to member-a, whose phalanx estimator
//     (still up) answers 0 for it.
//
// What runs (TestKarmadaGlobal, on the harness startFleet of
// fleet_test.go): Karmada's real propagation flow, nothing written by the
// test but the resource templates, their PropagationPolicies (and one
// OverridePolicy, in the move step), the Queues, the Clusters' cost labels
// and manifests/global/{job-status,failover}.yaml; karmada-controller-manager
// runs with gate Failover and NoExecute eviction, and the member-lost step
// stops a member's API server; phalanx-global (binary) decides
// the bindings whose policy names schedulerName phalanx-global, and kwok
// runs each member's pods (a pod with kwok's run-for annotation ends).
//
//   - The plane as above, with all of Karmada's CRDs (the resource
//     interpreter watches config.karmada.io), the namespace karmada-cluster
//     for the members' Secrets, and no PyTorchJob CRD in use.
//   - Members (startMemberScheduler): an in-process kube-apiserver with
//     nodes, kube-controller-manager's Job controller in-process, and the
//     phalanx-scheduler binary (scheduling, and serving the estimator as
//     above); no Karmada estimator. Each is joined as karmadactl join does
//     a Push member: in the member a ServiceAccount
//     karmada-cluster/karmada-controller-manager bound to cluster-admin and
//     a token for it (TokenRequest); in the plane a Secret
//     karmada-cluster/<member> with token and caBundle (the member's serving
//     certificate chain: Karmada's client config sets no TLS server name,
//     so the loopback CA of the member's rest.Config does not do), and the
//     Cluster (syncMode Push, apiEndpoint, secretRef). The workload
//     namespace is created in each member by the harness (Karmada's
//     namespace controller is not run).
//   - karmada-controller-manager (binary): --controllers=cluster,
//     clusterStatus,binding,execution,workStatus,bindingStatus (the resource
//     detector always runs), --cluster-status-update-frequency=2s,
//     --leader-elect=false, --metrics-bind-address=0,
//     --health-probe-bind-address=0, gate MultiplePodTemplatesScheduling;
//     --enable-taint-manager keeps its default (true) but gate Failover its
//     default (off in v1.18.2), so the taint manager is not registered; the
//     cluster controller still taints a Cluster not-ready (NoSchedule)
//     until the cluster status controller reports it Ready.
//   - karmada-scheduler as above, each member's estimator Service pointing
//     at its phalanx-scheduler.
//
// karmada-webhook is not run. What of its defaulting the flow needs is
// done instead: PropagationPolicies are created with the selector's
// namespace, the permanent-id label and the detector's finalizer set
// explicitly (propagateJob); the permanent-id labels of ResourceBindings
// and Works, which controllers create and the binding and binding status
// controllers look Works up by, come from two MutatingAdmissionPolicies on
// the plane (value <namespace>.<name>, not a UUID; the Work's manifests do
// not get it). Only v1alpha2 bindings are used (no conversion).
//
// Steps of TestKarmadaGlobal (global_test.go says what each asserts):
// propagation (the smoke test below, with karmada-scheduler), shares,
// dependency, bad-input and restart (phalanx-global).
//
// The smoke test: a batch/v1 Job template (parallelism 2, pods of
// schedulerName phalanx-scheduler, gang-size "2") and a PropagationPolicy
// for member-b (default-scheduler, clusterAffinity clusterNames) yield a
// ResourceBinding scheduled to member-b, an applied Work in
// karmada-es-member-b, the Job in member-b (none in member-a), its 2 pods
// bound by member-b's phalanx-scheduler as one implicit gang (its PodGroup,
// minMember 2, owned by the Job), and the binding's aggregatedStatus for
// member-b applied with the Job's status (active 2).
//
// Run: cd test/karmada && go test -count=1 ./... The first build of
// ./upstream downloads Karmada's dependencies and compiles k8s.io v0.35
// (about 4 minutes; karmada-controller-manager adds about 2 more); later
// runs take about a minute. PHALANX_SCHEDULER_BIN (a phalanx-scheduler
// binary) and KARMADA_BIN_DIR (a directory holding aggregated-apiserver,
// controller-manager, scheduler and scheduler-estimator built as TestMain
// does, tag included; TestMain fails naming any missing) skip the builds;
// PHALANX_GLOBAL_BIN (a phalanx-global binary) skips its build;
// PHALANX_KARMADA_LOGS=dir keeps every component's log; -short skips the
// tests.
package karmada
