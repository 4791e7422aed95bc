package estimatorbench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/phalanx-sched/phalanx/internal/bench/host"
	"github.com/phalanx-sched/phalanx/internal/bench/stats"
	"github.com/phalanx-sched/phalanx/internal/estimator/estimatortest"
	"github.com/phalanx-sched/phalanx/internal/estimator/karmadapb"
	"github.com/phalanx-sched/phalanx/internal/testcluster"
)

// Run builds the member, starts phalanx-scheduler with its Karmada
// estimator and times each case's calls.
func Run(ctx context.Context, o Options) (rep Report, err error) {
	start := time.Now()
	o = o.withDefaults()
	rep = Report{Nodes: o.Nodes, GangSize: o.GangSize, Runs: o.Runs, Timeout: o.Timeout, GPUs: o.Nodes * estimatorNodeGPUs}
	defer func() { rep.Wall = time.Since(start) }()

	runner := testcluster.NewRunner("estimator", o.Log)
	defer runner.Close()
	defer testcluster.RecoverFatal(&err)
	c, err := testcluster.Start(runner, testcluster.Options{})
	if err != nil {
		return rep, err
	}
	if err := buildMember(ctx, c, o, &rep); err != nil {
		return rep, err
	}

	certs, err := estimatortest.WriteTLS(c.Dir)
	if err != nil {
		return rep, err
	}
	addr, err := estimatortest.FreeAddress()
	if err != nil {
		return rep, err
	}
	fmt.Fprintf(o.Progress, "estimator: starting %s with --karmada-estimator-address=%s\n", o.PhalanxBinary, addr)
	sched, err := startEstimatorScheduler(c, o.PhalanxBinary,
		"--karmada-estimator-address="+addr, "--karmada-cluster-name=member", "--karmada-kubeconfig="+c.Kubeconfig,
		"--karmada-estimator-cert-file="+certs.ServerCert, "--karmada-estimator-key-file="+certs.ServerKey,
		"--karmada-estimator-client-ca-file="+certs.CA)
	if err != nil {
		return rep, err
	}
	defer sched.Stop()
	if _, err := sched.WaitReady(ctx, 2*time.Minute); err != nil {
		return rep, err
	}
	est, conn, err := estimatortest.Dial(addr, certs, true)
	if err != nil {
		return rep, err
	}
	defer conn.Close()

	calls := newQueries(est, o.GangSize)
	if err := waitWholeMember(ctx, o, calls.replicas, sched.LogTail); err != nil {
		return rep, err
	}
	rep.Setup = time.Since(start)
	failed, err := runCases(ctx, o, sched, cases(o, calls), &rep)
	if err != nil {
		return rep, err
	}
	rep.PeakRSS, _ = host.PeakRSS(sched.PID())
	return rep, errors.Join(failed...)
}

// query is one kind of estimator call; it returns the answer.
type query func(context.Context) (int32, error)

// queries are the estimator's two calls for the bench's set and replica.
type queries struct{ sets, replicas query }

// resources are a container's requests of cpu CPUs, mem Gi and gpus GPUs.
func resources(cpu, mem, gpus int) v1.ResourceList {
	l := v1.ResourceList{v1.ResourceCPU: *resource.NewQuantity(int64(cpu), resource.DecimalSI),
		v1.ResourceMemory: resource.MustParse(fmt.Sprintf("%dGi", mem))}
	if gpus > 0 {
		l[testcluster.GPU] = *resource.NewQuantity(int64(gpus), resource.DecimalSI)
	}
	return l
}

// newQueries asks est for sets of a master and gangSize-1 workers, and for
// single replicas.
func newQueries(est karmadapb.EstimatorClient, gangSize int) queries {
	set := []*karmadapb.Component{
		estimatortest.Component("master", 1, resources(masterCPU, masterMem, 0), nil),
		estimatortest.Component("worker", int32(gangSize-1), resources(workerCPU, workerMem, 1), nil),
	}
	replica := estimatortest.Replicas(estimatorNS, resources(replicaCPU, replicaMem, 1))
	return queries{
		sets: func(ctx context.Context) (int32, error) {
			resp, err := est.MaxAvailableComponentSets(ctx, &karmadapb.MaxAvailableComponentSetsRequest{Cluster: "member", Namespace: estimatorNS, Components: set})
			return resp.GetMaxSets(), err
		},
		replicas: func(ctx context.Context) (int32, error) {
			resp, err := est.MaxAvailableReplicas(ctx, &karmadapb.MaxAvailableReplicasRequest{Cluster: "member", ReplicaRequirements: replica})
			return resp.GetMaxReplicas(), err
		},
	}
}

// waitWholeMember waits for the estimator's first full answer. The first
// answer waits for the estimator to serve (informers synced); the count of
// single replicas is exact once the planner's snapshot holds every node and
// fill pod. logTail is the scheduler's log, for the error.
func waitWholeMember(ctx context.Context, o Options, replicas query, logTail func() string) error {
	_, _, wantReplicas := Bounds(o.Nodes, o.GangSize)
	fmt.Fprintf(o.Progress, "estimator: waiting for the estimator to see the whole member (%d single replicas)\n", wantReplicas)
	var got int32
	var callErr error
	err := testcluster.Eventually(ctx, 3*time.Minute, func(ctx context.Context) (bool, error) {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		got, callErr = replicas(cctx)
		return callErr == nil && int(got) == wantReplicas, nil
	})
	if err != nil {
		return fmt.Errorf("the estimator's count of single replicas is %d (%v), want %d: %w; scheduler log: %s", got, callErr, wantReplicas, err, logTail())
	}
	return nil
}

// benchCase is a case with its call and the check of its answer.
type benchCase struct {
	c    Case
	call query
	sane func(int32) bool
}

// cases are the bench's cases: sets without and with a required
// ib-cluster, and single replicas.
func cases(o Options, calls queries) []benchCase {
	boundSets, boundIB, wantReplicas := Bounds(o.Nodes, o.GangSize)
	return []benchCase{
		{Case{Name: "sets", What: fmt.Sprintf("MaxAvailableComponentSets: 1 master (%d CPU) + %d workers (%d CPU, 1 GPU), no topology", masterCPU, o.GangSize-1, workerCPU),
			Want: fmt.Sprintf("1..%d", boundSets)}, calls.sets, func(n int32) bool { return n > 0 && int(n) <= boundSets }},
		{Case{Name: "sets-ib", What: "the same, the template (Job via its ResourceBinding) requiring one ib-cluster",
			Want: fmt.Sprintf("1..%d", boundIB)}, func(ctx context.Context) (int32, error) {
			return calls.sets(estimatortest.WithObject(ctx, "Job", estimatorNS, templateName))
		}, func(n int32) bool { return n > 0 && int(n) <= boundIB }},
		{Case{Name: "replicas", What: fmt.Sprintf("MaxAvailableReplicas: one replica of %d CPU, 1 GPU (every node's room)", replicaCPU),
			Want: strconv.Itoa(wantReplicas)}, calls.replicas, func(n int32) bool { return int(n) == wantReplicas }},
	}
}

// runCases times each case (and profiles it, with o.Profile) into
// rep.Cases; failed are the cases' failures, err a profiling error that
// ends the run.
func runCases(ctx context.Context, o Options, sched metricsSource, cases []benchCase, rep *Report) (failed []error, err error) {
	for _, k := range cases {
		ec := k.c
		fmt.Fprintf(o.Progress, "estimator: %-8s warm-up and %d calls: ", ec.Name, o.Runs)
		err := timeCase(ctx, &ec, k.call, o.Runs, o.Timeout, sched)
		if err == nil {
			err = check(ec, k.sane, o)
		}
		if err != nil {
			ec.Failed = err.Error()
			failed = append(failed, fmt.Errorf("%s: %w", ec.Name, err))
			fmt.Fprintf(o.Progress, "FAILED: %v\n", err)
		} else {
			l := stats.LatencyOf(ec.ClientMS)
			fmt.Fprintf(o.Progress, "answer %d, median %.1f ms, p95 %.1f ms (load %s)\n", ec.Answer, l.Median, l.P95, host.LoadAverage())
		}
		if o.Profile && err == nil {
			top, perr := profileCase(ctx, ec.Name, k.call, o, sched)
			if perr != nil {
				return failed, fmt.Errorf("%s: profiling: %w", ec.Name, perr)
			}
			ec.CPU = top
		}
		rep.Cases = append(rep.Cases, ec)
	}
	return failed, nil
}

// check says what is wrong with a timed case: an insane answer, timed-out
// calls, or answers that changed on an idle member.
func check(ec Case, sane func(int32) bool, o Options) error {
	switch {
	case !sane(ec.Answer):
		return fmt.Errorf("answer %d, want %s", ec.Answer, ec.Want)
	case ec.Timeouts > 0:
		return fmt.Errorf("%d of %d calls timed out (%v); answer %d", ec.Timeouts, o.Runs, o.Timeout, ec.Answer)
	case len(ec.Answers) > 1:
		return fmt.Errorf("answers changed from call to call on an idle member: %v", ec.Answers)
	}
	return nil
}
