package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	clglobal "github.com/phalanx-sched/phalanx/internal/cli/global"
	"github.com/phalanx-sched/phalanx/internal/served"
	"github.com/phalanx-sched/phalanx/internal/workload"
)

// conditionScheduled is the condition in which the scheduler says why a
// gang waits (internal/status.ConditionScheduled).
const conditionScheduled = "Scheduled"

// JobRow is one gang.
type JobRow struct {
	Namespace string `json:"namespace"`
	// Gang is the name of its group object; Kind is PodGroup
	// (scheduling.x-k8s.io) or Workload (a scheduling.k8s.io PodGroup).
	Gang string `json:"gang"`
	Kind string `json:"kind"`
	// Source is what made the gang: its owner (Job, JobSet, PyTorchJob,
	// Workload ...), else the group object itself.
	Source string `json:"source"`
	Queue  string `json:"queue,omitempty"`
	Bound  int32  `json:"bound"`
	Min    int32  `json:"minMember"`
	// State: Pending, Scheduling (partly bound), Running, Finished, Failed.
	State   string `json:"state"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Waiting is how long a pending gang has waited since it was submitted.
	Waiting string `json:"waiting,omitempty"`
	// Position is the gang's place, while it waits (QueuePositions).
	Position *phalanxv1alpha1.GangPosition `json:"position,omitempty"`
	created  time.Time
	// required is the gang's required topology level, if any.
	required string
}

// JobList is the jobs command's output.
type JobList struct {
	Jobs []JobRow `json:"jobs"`
	// Note says what could not be read, if anything.
	Note string `json:"note,omitempty"`
}

func jobs(ctx context.Context, c *clients, o Options) (*JobList, error) {
	rows, note, err := gangRows(ctx, c, c.namespace)
	if err != nil {
		return nil, err
	}
	out := &JobList{Jobs: []JobRow{}, Note: note}
	for _, r := range rows {
		if o.Queue == "" || r.Queue == o.Queue {
			out.Jobs = append(out.Jobs, r)
		}
	}
	clglobal.ByPosition(out.Jobs, func(r JobRow) (*phalanxv1alpha1.GangPosition, time.Time) { return r.Position, r.created })
	return out, nil
}

// gangRows reads every gang of namespace ns ("" for all): its group
// object, its pods and its position.
func gangRows(ctx context.Context, c *clients, ns string) ([]JobRow, string, error) {
	pods, err := c.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, "", err
	}
	type key struct{ ns, name, kind string }
	members := map[key][]*corev1.Pod{}
	for i := range pods.Items {
		p := &pods.Items[i]
		ref, err := workload.GangOf(p)
		if err != nil || ref.Source == workload.SourceNone {
			continue
		}
		kind := "PodGroup"
		if ref.Source == workload.SourceWorkloadAPI {
			kind = "Workload"
		}
		k := key{p.Namespace, ref.Name, kind}
		members[k] = append(members[k], p)
	}
	positions := map[key]*phalanxv1alpha1.GangPosition{}
	var note []string
	qps, err := c.phalanx.SchedulingV1alpha1().QueuePositionses(ns).List(ctx, metav1.ListOptions{})
	if err == nil {
		for i := range qps.Items {
			qp := &qps.Items[i]
			for j := range qp.Gangs {
				g := &qp.Gangs[j]
				positions[key{qp.Namespace, g.Name, g.Kind}] = g
			}
		}
	} else {
		note = append(note, "positions not shown: "+explain(err).Error())
	}
	var rows []JobRow
	pgs, err := listPodGroups(ctx, c, ns)
	if err != nil {
		return nil, "", err
	}
	for i := range pgs {
		pg := &pgs[i]
		k := key{pg.Namespace, pg.Name, "PodGroup"}
		r := JobRow{Namespace: pg.Namespace, Gang: pg.Name, Kind: "PodGroup", Source: ownerOf(pg.OwnerReferences, "PodGroup"),
			Min: pg.Spec.MinMember, Queue: pg.Labels[phalanxv1alpha1.QueueLabel], created: pg.CreationTimestamp.Time,
			required: pg.Annotations[phalanxv1alpha1.TopologyRequiredAnnotation]}
		r.State = string(pg.Status.Phase)
		if r.State == "" {
			r.State = string(pgv1alpha1.PodGroupPending)
		}
		if cond := meta.FindStatusCondition(pg.Status.Conditions, conditionScheduled); cond != nil {
			r.Reason, r.Message = cond.Reason, cond.Message
		}
		rows = append(rows, finish(r, members[k], positions[k]))
	}
	if ok, _ := served.Resource(c.config, schedulingv1beta1.SchemeGroupVersion.String(), "podgroups"); ok {
		ups, err := c.kube.SchedulingV1beta1().PodGroups(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			note = append(note, "Workload API PodGroups not shown: "+explain(err).Error())
		} else {
			for i := range ups.Items {
				pg := &ups.Items[i]
				k := key{pg.Namespace, pg.Name, "Workload"}
				r := JobRow{Namespace: pg.Namespace, Gang: pg.Name, Kind: "Workload", Source: "PodGroup (Workload API)",
					Min: 1, Queue: pg.Labels[phalanxv1alpha1.QueueLabel], State: "Pending", created: pg.CreationTimestamp.Time,
					required: pg.Annotations[phalanxv1alpha1.TopologyRequiredAnnotation]}
				if wl := workload.WorkloadOf(pg); wl != "" {
					r.Source = "Workload " + wl
				}
				if g := pg.Spec.SchedulingPolicy.Gang; g != nil {
					r.Min = g.MinCount
				}
				if meta.IsStatusConditionTrue(pg.Status.Conditions, schedulingv1beta1.PodGroupInitiallyScheduled) {
					r.State = "Running"
				}
				if cond := meta.FindStatusCondition(pg.Status.Conditions, conditionScheduled); cond != nil {
					r.Reason, r.Message = cond.Reason, cond.Message
				}
				rows = append(rows, finish(r, members[k], positions[k]))
			}
		}
	}
	return rows, strings.Join(note, "; "), nil
}

// podGroup is a scheduler-plugins PodGroup with the status conditions
// phalanx adds to its CRD (the Go type has none).
type podGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              pgv1alpha1.PodGroupSpec `json:"spec"`
	Status            struct {
		pgv1alpha1.PodGroupStatus `json:",inline"`
		Conditions                []metav1.Condition `json:"conditions,omitempty"`
	} `json:"status"`
}

func listPodGroups(ctx context.Context, c *clients, ns string) ([]podGroup, error) {
	raw, err := c.podGroups.SchedulingV1alpha1().RESTClient().Get().Namespace(ns).Resource("podgroups").Do(ctx).Raw()
	if err != nil {
		return nil, err
	}
	var list struct {
		Items []podGroup `json:"items"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("reading PodGroups: %w", err)
	}
	return list.Items, nil
}

// finish counts the gang's bound members and adds its position.
func finish(r JobRow, pods []*corev1.Pod, pos *phalanxv1alpha1.GangPosition) JobRow {
	for _, p := range pods {
		if p.Spec.NodeName != "" && p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodFailed {
			r.Bound++
		}
		if r.Source == "PodGroup" {
			if o := ownerOf(p.OwnerReferences, ""); o != "" {
				r.Source = o
			}
		}
		if r.Queue == "" {
			r.Queue = p.Labels[phalanxv1alpha1.QueueLabel]
		}
		if r.required == "" {
			r.required = p.Annotations[phalanxv1alpha1.TopologyRequiredAnnotation]
		}
	}
	if pos != nil {
		r.Position = pos
		r.Queue = pos.Queue
	}
	if r.State == "Pending" || r.State == string(pgv1alpha1.PodGroupScheduling) {
		r.Waiting = time.Since(r.created).Round(time.Second).String()
	}
	if r.Reason == "" && pos != nil {
		r.Reason = "Queued"
	}
	return r
}

// ownerOf names the first owner ("Kind name"), or def.
func ownerOf(refs []metav1.OwnerReference, def string) string {
	for _, o := range refs {
		if o.Kind == "ReplicaSet" || o.Kind == "Pod" {
			continue
		}
		return o.Kind + " " + o.Name
	}
	return def
}

func (l *JobList) table(w io.Writer) error {
	if len(l.Jobs) == 0 {
		fmt.Fprintln(w, "No gangs.")
	} else {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAMESPACE\tGANG\tSOURCE\tQUEUE\tBOUND/MIN\tSTATE\tWAITING\tPOSITION\tSTART\tREASON")
		for _, j := range l.Jobs {
			pos, start := "-", "-"
			if p := j.Position; p != nil {
				pos = fmt.Sprintf("%d/%d in %s (#%d in cluster)", p.PositionInQueue, p.QueueLength, p.Queue, p.PositionInCluster)
				if p.ExpectedStart != nil {
					start = p.ExpectedStart.UTC().Format(time.RFC3339)
				}
			}
			waiting := j.Waiting
			if waiting == "" {
				waiting = "-"
			}
			queueName := j.Queue
			if queueName == "" {
				queueName = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\t%s\t%s\n", j.Namespace, j.Gang, j.Source, queueName, j.Bound, j.Min, j.State, waiting, pos, start, firstClause(j.Reason, j.Message))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if l.Note != "" {
		fmt.Fprintln(w, "Note:", l.Note)
	}
	return nil
}

// firstClause is the reason and the first clause of the message: the
// blocking reason comes first in every message phalanx writes.
func firstClause(reason, message string) string {
	if message == "" {
		if reason == "" {
			return "-"
		}
		return reason
	}
	if i := strings.Index(message, ". "); i > 0 {
		message = message[:i]
	}
	if len(message) > 100 {
		message = message[:97] + "..."
	}
	return reason + ": " + message
}
