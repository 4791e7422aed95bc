package controller

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
)

// podSpec is a compact description of one gang member.
type podSpec struct {
	phase       v1.PodPhase
	node        string // "" = not bound
	terminating bool
}

func (s podSpec) pod(i int) v1.Pod {
	p := v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("m-%d", i), Namespace: "ns"},
		Spec:       v1.PodSpec{NodeName: s.node},
		Status:     v1.PodStatus{Phase: s.phase},
	}
	if s.terminating {
		ts := metav1.NewTime(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
		p.DeletionTimestamp = &ts
	}
	return p
}

// Shorthands. A Running/Succeeded/Failed pod has been bound to a node.
var (
	unbound   = podSpec{phase: v1.PodPending}
	bound     = podSpec{phase: v1.PodPending, node: "n1"}
	running   = podSpec{phase: v1.PodRunning, node: "n1"}
	succeeded = podSpec{phase: v1.PodSucceeded, node: "n1"}
	failed    = podSpec{phase: v1.PodFailed, node: "n1"}
	unknown   = podSpec{phase: v1.PodUnknown, node: "n1"}
)

func terminating(s podSpec) podSpec { s.terminating = true; return s }

func pods(specs ...podSpec) []v1.Pod {
	out := make([]v1.Pod, len(specs))
	for i, s := range specs {
		out[i] = s.pod(i)
	}
	return out
}

func repeat(s podSpec, n int) []podSpec {
	out := make([]podSpec, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func concat(lists ...[]podSpec) []podSpec {
	var out []podSpec
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

func TestComputePodGroupStatusPhaseAndCounts(t *testing.T) {
	tests := []struct {
		name      string
		minMember int32
		pods      []podSpec
		want      PodGroupStatus // ScheduleStartTime is checked in its own test
	}{
		// Pending: nothing bound yet.
		{
			name:      "no pods",
			minMember: 3,
			want:      PodGroupStatus{Phase: pgv1alpha1.PodGroupPending},
		},
		{
			name:      "all members created, none bound",
			minMember: 3,
			pods:      repeat(unbound, 3),
			want:      PodGroupStatus{Phase: pgv1alpha1.PodGroupPending},
		},
		{
			name:      "more pods than minMember, none bound",
			minMember: 2,
			pods:      repeat(unbound, 5),
			want:      PodGroupStatus{Phase: pgv1alpha1.PodGroupPending},
		},

		// Scheduling: some member bound, not enough running.
		{
			name:      "one member bound, others unbound",
			minMember: 3,
			pods:      []podSpec{bound, unbound, unbound},
			want:      PodGroupStatus{Phase: pgv1alpha1.PodGroupScheduling, Scheduled: 1},
		},
		{
			name:      "whole gang bound, containers starting",
			minMember: 3,
			pods:      repeat(bound, 3),
			want:      PodGroupStatus{Phase: pgv1alpha1.PodGroupScheduling, Scheduled: 3},
		},
		{
			name:      "some running, below minMember",
			minMember: 3,
			pods:      []podSpec{running, running, bound},
			want:      PodGroupStatus{Phase: pgv1alpha1.PodGroupScheduling, Scheduled: 3, Running: 2},
		},
		{
			name:      "bound pod in Unknown phase counts as scheduled only",
			minMember: 2,
			pods:      []podSpec{unknown, unbound},
			want:      PodGroupStatus{Phase: pgv1alpha1.PodGroupScheduling, Scheduled: 1},
		},
		{
			name:      "one succeeded, rest not bound: Scheduling, not Pending",
			minMember: 3,
			pods:      []podSpec{succeeded, unbound, unbound},
			want:      PodGroupStatus{Phase: pgv1alpha1.PodGroupScheduling, Succeeded: 1},
		},

		// Running: running+succeeded reach minMember.
		{
			name:      "exactly minMember running",
			minMember: 3,
			pods:      repeat(running, 3),
			want:      PodGroupStatus{Phase: pgv1alpha1.PodGroupRunning, Scheduled: 3, Running: 3},
		},
		{
			name:      "running and succeeded add up to minMember",
			minMember: 4,
			pods:      []podSpec{running, running, succeeded, succeeded},
			want:      PodGroupStatus{Phase: pgv1alpha1.PodGroupRunning, Scheduled: 2, Running: 2, Succeeded: 2},
		},
		{
			name:      "minMember running plus extra unbound members",
			minMember: 2,
			pods:      []podSpec{running, running, unbound, bound},
			want:      PodGroupStatus{Phase: pgv1alpha1.PodGroupRunning, Scheduled: 3, Running: 2},
		},
		{
			name:      "minMember succeeded but one still running: not Finished yet",
			minMember: 2,
			pods:      []podSpec{succeeded, succeeded, running},
			want:      PodGroupStatus{Phase: pgv1alpha1.PodGroupRunning, Scheduled: 1, Running: 1, Succeeded: 2},
		},
		{
			name:      "a failure that still leaves minMember alive keeps Running",
			minMember: 2,
			pods:      []podSpec{running, running, failed},
			want:      PodGroupStatus{Phase: pgv1alpha1.PodGroupRunning, Scheduled: 2, Running: 2, Failed: 1},
		},

		// Finished.
		{
			name:      "all members succeeded",
			minMember: 3,
			pods:      repeat(succeeded, 3),
			want:      PodGroupStatus{Phase: pgv1alpha1.PodGroupFinished, Succeeded: 3},
		},
		{
			name:      "minMember succeeded and the rest failed",
			minMember: 2,
			pods:      []podSpec{succeeded, succeeded, failed},
			want:      PodGroupStatus{Phase: pgv1alpha1.PodGroupFinished, Succeeded: 2, Failed: 1},
		},
		{
			name:      "more succeeded than minMember",
			minMember: 2,
			pods:      repeat(succeeded, 4),
			want:      PodGroupStatus{Phase: pgv1alpha1.PodGroupFinished, Succeeded: 4},
		},

		// Failed: not enough non-failed members left to reach minMember.
		{
			name:      "one of a full gang failed while others run",
			minMember: 3,
			pods:      []podSpec{running, running, failed},
			want:      PodGroupStatus{Phase: pgv1alpha1.PodGroupFailed, Scheduled: 2, Running: 2, Failed: 1},
		},
		{
			name:      "all members failed",
			minMember: 2,
			pods:      repeat(failed, 2),
			want:      PodGroupStatus{Phase: pgv1alpha1.PodGroupFailed, Failed: 2},
		},
		{
			name:      "succeeded and failed, too few succeeded",
			minMember: 3,
			pods:      []podSpec{succeeded, succeeded, failed},
			want:      PodGroupStatus{Phase: pgv1alpha1.PodGroupFailed, Succeeded: 2, Failed: 1},
		},
		{
			name:      "failure with enough unbound members left: Pending, not Failed",
			minMember: 3,
			pods:      []podSpec{failed, unbound, unbound, unbound},
			want:      PodGroupStatus{Phase: pgv1alpha1.PodGroupPending, Failed: 1},
		},
		{
			name:      "failed member replaced (e.g. by a Job): not Failed",
			minMember: 2,
			pods:      []podSpec{failed, running, bound},
			want:      PodGroupStatus{Phase: pgv1alpha1.PodGroupScheduling, Scheduled: 2, Running: 1, Failed: 1},
		},

		// Terminating pods.
		{
			name:      "terminating running pods are ignored entirely",
			minMember: 2,
			pods:      []podSpec{terminating(running), terminating(running)},
			want:      PodGroupStatus{Phase: pgv1alpha1.PodGroupPending},
		},
		{
			name:      "terminating pods do not make up minMember",
			minMember: 3,
			pods:      []podSpec{running, running, terminating(running)},
			want:      PodGroupStatus{Phase: pgv1alpha1.PodGroupScheduling, Scheduled: 2, Running: 2},
		},
		{
			name:      "terminating bound and unbound pending pods are ignored",
			minMember: 1,
			pods:      []podSpec{terminating(bound), terminating(unbound)},
			want:      PodGroupStatus{Phase: pgv1alpha1.PodGroupPending},
		},
		{
			name:      "terminating succeeded pods still count as succeeded",
			minMember: 2,
			pods:      []podSpec{terminating(succeeded), succeeded},
			want:      PodGroupStatus{Phase: pgv1alpha1.PodGroupFinished, Succeeded: 2},
		},
		{
			// An evicted (reclaimed, preempted) member is Failed while it is
			// deleted: that is not the job failing.
			name:      "terminating failed pods are evictions, not failures",
			minMember: 2,
			pods:      []podSpec{terminating(failed), running},
			want:      PodGroupStatus{Phase: pgv1alpha1.PodGroupScheduling, Scheduled: 1, Running: 1},
		},
		{
			name:      "an evicted gang is not reported Failed",
			minMember: 2,
			pods:      []podSpec{terminating(failed), terminating(failed)},
			want:      PodGroupStatus{Phase: pgv1alpha1.PodGroupPending},
		},
		{
			name:      "not Finished while a member beyond minMember is bound but not running",
			minMember: 2,
			pods:      []podSpec{succeeded, succeeded, bound},
			want:      PodGroupStatus{Phase: pgv1alpha1.PodGroupRunning, Scheduled: 1, Succeeded: 2},
		},

		// Counting.
		{
			name:      "mixed gang: every counter",
			minMember: 10,
			pods: concat(
				repeat(running, 3),
				repeat(bound, 2),
				repeat(unbound, 2),
				repeat(succeeded, 2),
				repeat(failed, 1),
				[]podSpec{terminating(running), terminating(failed)},
			),
			// Terminating pods are ignored; 7 active + 2 succeeded = 9 <
			// minMember 10 with a real failure.
			want: PodGroupStatus{Phase: pgv1alpha1.PodGroupFailed, Scheduled: 5, Running: 3, Succeeded: 2, Failed: 1},
		},
		{
			name:      "scheduled excludes terminal pods even though they were bound",
			minMember: 5,
			pods:      []podSpec{succeeded, failed, running, bound, unbound, unbound},
			want:      PodGroupStatus{Phase: pgv1alpha1.PodGroupScheduling, Scheduled: 2, Running: 1, Succeeded: 1, Failed: 1},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := ComputePodGroupStatus(tc.minMember, pods(tc.pods...), pgv1alpha1.PodGroupStatus{})
			got.ScheduleStartTime = nil
			if got != tc.want {
				t.Errorf("ComputePodGroupStatus(%d, ...) =\n  %+v\nwant\n  %+v", tc.minMember, got, tc.want)
			}
		})
	}
}

func TestComputePodGroupStatusScheduleStartTime(t *testing.T) {
	previous := metav1.NewTime(time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC))
	tests := []struct {
		name      string
		pods      []podSpec
		previous  metav1.Time
		wantPhase pgv1alpha1.PodGroupPhase
		// wantStart: "nil", "previous" or "now".
		wantStart string
	}{
		{name: "pending, never started: unset", pods: repeat(unbound, 2), wantPhase: pgv1alpha1.PodGroupPending, wantStart: "nil"},
		{name: "pending with a previous start: kept", pods: repeat(unbound, 2), previous: previous, wantPhase: pgv1alpha1.PodGroupPending, wantStart: "previous"},
		{name: "leaving Pending to Scheduling: set to now", pods: []podSpec{bound, unbound}, wantPhase: pgv1alpha1.PodGroupScheduling, wantStart: "now"},
		{name: "first seen Running: set to now", pods: repeat(running, 2), wantPhase: pgv1alpha1.PodGroupRunning, wantStart: "now"},
		{name: "first seen Finished: set to now", pods: repeat(succeeded, 2), wantPhase: pgv1alpha1.PodGroupFinished, wantStart: "now"},
		{name: "first seen Failed: set to now", pods: repeat(failed, 2), wantPhase: pgv1alpha1.PodGroupFailed, wantStart: "now"},
		{name: "scheduling with a previous start: kept", pods: []podSpec{bound, unbound}, previous: previous, wantPhase: pgv1alpha1.PodGroupScheduling, wantStart: "previous"},
		{name: "running with a previous start: kept", pods: repeat(running, 2), previous: previous, wantPhase: pgv1alpha1.PodGroupRunning, wantStart: "previous"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := time.Now()
			got := ComputePodGroupStatus(2, pods(tc.pods...), pgv1alpha1.PodGroupStatus{ScheduleStartTime: tc.previous})
			after := time.Now()
			if got.Phase != tc.wantPhase {
				t.Fatalf("phase = %s, want %s", got.Phase, tc.wantPhase)
			}
			switch tc.wantStart {
			case "nil":
				if got.ScheduleStartTime != nil {
					t.Errorf("ScheduleStartTime = %v, want unset", got.ScheduleStartTime)
				}
			case "previous":
				if got.ScheduleStartTime == nil || !got.ScheduleStartTime.Equal(&tc.previous) {
					t.Errorf("ScheduleStartTime = %v, want %v", got.ScheduleStartTime, tc.previous)
				}
			case "now":
				if got.ScheduleStartTime == nil {
					t.Fatal("ScheduleStartTime unset, want the current time")
				}
				if st := got.ScheduleStartTime.Time; st.Before(before) || st.After(after) {
					t.Errorf("ScheduleStartTime = %v, want within [%v, %v]", st, before, after)
				}
			default:
				t.Fatalf("bad wantStart %q", tc.wantStart)
			}
		})
	}
}

// TestComputePodGroupStatusFinishedIsFinal: once Finished, a gang stays
// Finished when its pods are garbage-collected, so dependents never wait again.
func TestComputePodGroupStatusFinishedIsFinal(t *testing.T) {
	prev := pgv1alpha1.PodGroupStatus{Phase: pgv1alpha1.PodGroupFinished, Succeeded: 4}
	got := ComputePodGroupStatus(4, nil, prev)
	if got.Phase != pgv1alpha1.PodGroupFinished || got.Succeeded != 4 {
		t.Fatalf("after GC: %+v, want Finished with 4 succeeded", got)
	}
	got = ComputePodGroupStatus(4, pods(succeeded), prev)
	if got.Phase != pgv1alpha1.PodGroupFinished || got.Succeeded != 4 {
		t.Fatalf("after partial GC: %+v, want Finished with 4 succeeded", got)
	}
	// A new member (the job was restarted) makes it active again.
	got = ComputePodGroupStatus(4, pods(unbound), prev)
	if got.Phase == pgv1alpha1.PodGroupFinished {
		t.Fatalf("a gang with an active member is not Finished: %+v", got)
	}
}
