// Package karmada tests phalanx-scheduler's Karmada scheduler-estimator
// against Karmada's real components (v1.18.2), built from Karmada's Go
// module. It is a separate module: Karmada pulls dependencies phalanx
// does not want (see ../../go.mod). Karmada's commands are built by
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
// Not run, and done by the test instead: karmada-controller-manager's
// cluster status controller (the test writes each Cluster's Ready
// condition, API enablements from the member's discovery and resource
// summary from its nodes and pods), its detector (the test creates each
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
// Run: cd test/karmada && go test -count=1 ./... The first build of
// ./upstream downloads Karmada's dependencies and compiles k8s.io v0.35
// (about 4 minutes); later runs take about a minute. PHALANX_SCHEDULER_BIN
// (a phalanx-scheduler binary) and KARMADA_BIN_DIR (a directory holding
// aggregated-apiserver, scheduler and scheduler-estimator built as
// TestMain does, tag included) skip the builds; PHALANX_KARMADA_LOGS=dir
// keeps every component's log; -short skips the test.
package karmada
