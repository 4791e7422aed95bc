package sim

import (
	"time"

	"github.com/phalanx-sched/phalanx/internal/sim/metrics"
	"github.com/phalanx-sched/phalanx/internal/sim/scenario"
)

type JobResult struct {
	Job       scenario.Job
	key       string // Job.Key()
	Submitted time.Duration
	// QuorumAt is when MinMember (or all, for plain jobs) members were bound.
	QuorumAt time.Duration
	// FinishedAt is when the last pod completed (0: it did not).
	FinishedAt time.Duration
	// Spread is the time between the first and the quorum-th bind: how long
	// the gang was partially bound (binds of one Permit land over milliseconds).
	Spread    time.Duration
	MaxBound  int
	Completed int
	// Evicted counts pods deleted before they completed (reclaim); the
	// simulator resubmits them, as a training operator would.
	Evicted int
	// Nodes counts the job's pods per node, over the whole run.
	Nodes map[string]int
	// Reason is the scheduler's condition message for a job that did not run.
	Reason string
	// MaxLiveDomains is the most domains of the job's required network
	// level its running pods spanned at one sample (0 without a
	// requirement). Unlike Nodes, it does not add up placements a gang had
	// before and after being evicted and resubmitted.
	MaxLiveDomains int
	// MaxSplitSubGroups is, for a job with sub-groups (ranks by label), the
	// most sub-groups whose running pods spanned more than one domain of
	// the sub-groups' level at one sample.
	MaxSplitSubGroups int

	// CompletedGPUSeconds is GPUs × seconds (of the run) held by this
	// job's pods that ran to completion, bound to completed; LostGPUSeconds
	// by its pods deleted before they completed (reclaim, preemption), bound
	// to deleted: work thrown away.
	CompletedGPUSeconds, LostGPUSeconds float64
	// RestartedAt is when the job reached its quorum again after evictions
	// broke it (0: never broken, or not restarted).
	RestartedAt time.Duration
	// WaitedBy is the replay time this job spent waiting by cause
	// (metrics.WaitCause), judged at each sample until the next; HeldBy the part
	// judged metrics.WaitRoomHeld by the scheduler's last word on its pods.
	WaitedBy, HeldBy map[string]time.Duration

	// lastCause and lastWord are the cause and word judged at the last
	// sample, counted into WaitedBy and HeldBy at the next.
	lastCause, lastWord string
	firstAt             time.Duration
	placed              map[string]bool // pods seen bound, by name
	done                map[string]bool
	boundAt             map[string]time.Duration
	broken              bool // evictions took it below its quorum after it started
}

// Ran reports whether the job reached its quorum.
func (r *JobResult) Ran() bool { return r.QuorumAt > 0 }

// Wait is the time from submission to quorum; for a job whose quorum
// evictions broke, from its first submission to its last start (it is
// resubmitted as a training operator would, and waits again).
func (r *JobResult) Wait() time.Duration {
	if r.RestartedAt > 0 {
		return r.RestartedAt - r.Submitted
	}
	return r.QuorumAt - r.Submitted
}

// WaitUntil is Wait for a job that started, and for one that did not, its
// wait until end.
func (r *JobResult) WaitUntil(end time.Duration) time.Duration {
	if r.Ran() {
		return r.Wait()
	}
	return end - r.Submitted
}

// Sample is the cluster at one moment.
type Sample struct {
	At      time.Duration
	GPUUsed int64
	CPUUsed int64 // millicores
	// UsefulGPU is held by pods of jobs that started (gangs with minMember
	// bound, and plain pods); StrandedGPU by members of gangs that did not.
	UsefulGPU, StrandedGPU int64
	// FragGPU counts free GPUs on nodes where no waiting pod fits
	// (metrics.FragmentedGPUs); JobsWaiting the submitted jobs not started yet.
	FragGPU     int64
	JobsWaiting int
	// LongestWait is how long the job waiting longest has waited so far.
	LongestWait time.Duration
	// QueueWaitingGPU is the GPUs the queue's unbound pods ask for.
	QueueWaitingGPU map[string]int64
	// QueueUsed is the dominant resource (GPUs, or millicores without GPUs)
	// used per queue; QueueWaiting counts the queue's unbound pods.
	QueueUsed    map[string]int64
	QueueWaiting map[string]int
	// WaitCauses counts the waiting jobs by why they had not started
	// (metrics.WaitCause).
	WaitCauses map[string]int
	// HeldBy counts the jobs judged metrics.WaitRoomHeld by the scheduler's last
	// word on one of their unbound pods (metrics.SchedulerWord).
	HeldBy map[string]int
	// IdleGPU is the free GPUs of the untainted nodes per domain of each
	// network level above the host, keyed "level=domain" (nil without
	// levels): where the idle GPUs were.
	IdleGPU map[string]int
	// SchedulerQueue is the in-process scheduler's pending pods by its
	// queue (scheduler_pending_pods: active, backoff, unschedulable,
	// gated, ...); nil for a scheduler binary.
	SchedulerQueue map[string]int
}

// NodeResult is a node of the simulated cluster.
type NodeResult struct {
	Name    string
	Labels  map[string]string
	GPUs    int64
	CPU     int64 // millicores
	Memory  int64 // bytes
	Tainted bool
	Zones   int
}

// Result is a finished run.
type Result struct {
	Scenario *scenario.Scenario
	Jobs     []*JobResult
	Elapsed  time.Duration
	GPUs     int64
	CPU      int64 // millicores
	Nodes    []NodeResult
	Samples  []Sample
	// NUMAViolations lists moments when the pods running on a NUMA node did
	// not fit its zones as the kubelet would assign them.
	NUMAViolations []string
	// SubmitLag is the longest a job's submission started after its
	// arrival: the replay's own delay, not the scheduler's.
	SubmitLag time.Duration
}

// countWait adds since to the cause (and word) judged at the last sample,
// and forgets them: the next sample judges again.
func (r *JobResult) countWait(since time.Duration) {
	if r.lastCause != "" && since > 0 {
		if r.WaitedBy == nil {
			r.WaitedBy = map[string]time.Duration{}
		}
		r.WaitedBy[r.lastCause] += since
		if r.lastCause == metrics.WaitRoomHeld {
			if r.HeldBy == nil {
				r.HeldBy = map[string]time.Duration{}
			}
			r.HeldBy[r.lastWord] += since
		}
	}
	r.lastCause, r.lastWord = "", ""
}
