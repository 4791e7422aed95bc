package sim

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/component-base/metrics/legacyregistry"

	configv1 "github.com/phalanx-sched/phalanx/apis/config/v1"
	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/numa"
	"github.com/phalanx-sched/phalanx/internal/resources"
	"github.com/phalanx-sched/phalanx/internal/sim/metrics"
	"github.com/phalanx-sched/phalanx/internal/sim/scenario"
	"github.com/phalanx-sched/phalanx/internal/testcluster"
)

// tally is what one sample adds up over the pods, per job and per node.
type tally struct {
	sample        Sample
	bound         map[string]int           // per job: bound pods, completed ones too
	running       map[string][]*v1.Pod     // per node: its running pods
	live          map[string]int           // per job: bound, not completed
	liveNodes     map[string][]string      // per job: nodes of its running pods
	liveRanks     map[string][]rankedPod   // per job with sub-groups: its running pods' ranks and nodes
	jobGPU        map[string]int64         // per job: GPUs of its running pods
	nodeUsed      map[string]metrics.Room  // per node: requests of its running pods
	waitingShapes map[metrics.Shape]bool   // shapes of the unbound pods
	jobShape      map[string]metrics.Shape // per job: the shape of its unbound pods
	jobWord       map[string]string        // per job: the scheduler's last word on an unbound pod
	jobWordPod    map[string]string        // per job: the pod jobWord is from
}

func newTally(now time.Duration) *tally {
	return &tally{
		sample: Sample{At: now, QueueUsed: map[string]int64{}, QueueWaiting: map[string]int{}, QueueWaitingGPU: map[string]int64{}},
		bound:  map[string]int{}, running: map[string][]*v1.Pod{}, live: map[string]int{}, liveNodes: map[string][]string{},
		liveRanks: map[string][]rankedPod{}, jobGPU: map[string]int64{}, nodeUsed: map[string]metrics.Room{},
		waitingShapes: map[metrics.Shape]bool{}, jobShape: map[string]metrics.Shape{}, jobWord: map[string]string{}, jobWordPod: map[string]string{},
	}
}

// observe reads every pod once and updates the job results and the sample.
// kwok plays the kubelet: it starts bound pods and completes them after their
// run time. Pods deleted before completing (reclaim) are resubmitted.
func (d *driver) observe(ctx context.Context, now time.Duration) (bool, error) {
	pods, err := d.pods.list()
	if err != nil {
		return false, err
	}
	changed := false
	d.finishing = 0
	t := newTally(now)
	for _, p := range pods {
		if d.countPod(t, p, now) {
			changed = true
		}
	}
	resubmitted, err := d.resubmitEvicted(ctx, now)
	if err != nil {
		return false, err
	}
	d.updateStarts(t.bound, now)
	d.measureJobs(t, now)
	d.finishSample(t, now)
	return changed || resubmitted, nil
}

// countPod adds one pod to the sample's tally and to its job's result; it
// reports whether the job changed (a pod newly bound or completed).
func (d *driver) countPod(t *tally, p *v1.Pod, now time.Duration) bool {
	if r := d.finished[p.UID]; r != nil {
		// Counted when it completed; most pods of a long replay are.
		t.bound[r.key]++
		return false
	}
	r := d.jobOf(p)
	if r == nil {
		return false
	}
	queue := r.Job.Queue
	if queue == "" {
		queue = configv1.DefaultQueueName
	}
	if p.Spec.NodeName == "" {
		d.countUnbound(t, r, p, queue)
		return false
	}
	changed := false
	if !r.placed[p.Name] {
		r.placed[p.Name] = true
		r.boundAt[p.Name] = now
		r.Nodes[p.Spec.NodeName]++
		changed = true
	}
	if p.Status.Phase == v1.PodSucceeded {
		if !r.done[p.Name] {
			r.done[p.Name] = true
			r.CompletedGPUSeconds += float64(r.Job.GPUs) * (now - r.boundAt[p.Name]).Seconds()
			r.Completed++
			d.finished[p.UID] = r
			changed = true
			if r.Completed == r.Job.Replicas {
				r.FinishedAt = now
			}
		}
	} else if p.DeletionTimestamp == nil {
		d.countRunning(t, r, p, queue)
	}
	t.bound[r.key]++
	return changed
}

// countUnbound adds a pod waiting for a node: its queue's demand, its
// shape, and the scheduler's word on it.
func (d *driver) countUnbound(t *tally, r *JobResult, p *v1.Pod, queue string) {
	t.sample.QueueWaiting[queue]++
	req := d.requests(r.Job, p)
	t.sample.QueueWaitingGPU[queue] += req[testcluster.GPU]
	shape := metrics.Shape{CPU: req[v1.ResourceCPU], Memory: req[v1.ResourceMemory], GPUs: req[testcluster.GPU]}
	t.waitingShapes[shape] = true
	t.jobShape[r.key] = shape
	// A word other than not-tried wins; among alike, the first pod
	// by name (the list comes in map order).
	w := d.schedulerWord(p)
	tried := func(w string) bool { return w != "" && w != metrics.WordNotTried }
	if cur, ok := t.jobWord[r.key]; !ok || tried(w) && !tried(cur) || tried(w) == tried(cur) && p.Name < t.jobWordPod[r.key] {
		t.jobWord[r.key], t.jobWordPod[r.key] = w, p.Name
	}
}

// countRunning adds a bound pod that has not completed: what it uses, of
// its queue and of its node, and where it runs.
func (d *driver) countRunning(t *tally, r *JobResult, p *v1.Pod, queue string) {
	req := d.requests(r.Job, p)
	gpus, cpu := req[testcluster.GPU], req[v1.ResourceCPU]
	t.sample.GPUUsed += gpus
	t.sample.CPUUsed += cpu
	if d.res.GPUs > 0 {
		t.sample.QueueUsed[queue] += gpus
	} else {
		t.sample.QueueUsed[queue] += cpu
	}
	node := p.Spec.NodeName
	t.running[node] = append(t.running[node], p)
	t.live[r.key]++
	t.liveNodes[r.key] = append(t.liveNodes[r.key], node)
	if rank, err := strconv.Atoi(p.Labels[phalanxv1alpha1.RankLabel]); err == nil {
		t.liveRanks[r.key] = append(t.liveRanks[r.key], rankedPod{rank, node})
	}
	t.jobGPU[r.key] += gpus
	u := t.nodeUsed[node]
	u.CPU += cpu
	u.Memory += req[v1.ResourceMemory]
	u.GPUs += gpus
	t.nodeUsed[node] = u
	if r.Job.Duration.Duration > 0 {
		d.finishing++
	}
}

// resubmitEvicted resubmits the pods deleted before they completed
// (reclaim, preemption, consolidation), as a training operator would; it
// reports whether there were any.
func (d *driver) resubmitEvicted(ctx context.Context, now time.Duration) (bool, error) {
	changed := false
	evicted := d.pods.takeEvicted()
	for _, key := range slices.Sorted(maps.Keys(evicted)) { // namespace/name
		p := evicted[key]
		r := d.submitted[p.Namespace+"/"+p.Labels[jobLabel]]
		i, err := strconv.Atoi(strings.TrimPrefix(p.Name, p.Labels[jobLabel]+"-"))
		if r == nil || err != nil || r.done[p.Name] {
			continue
		}
		if at, ok := r.boundAt[p.Name]; ok {
			r.LostGPUSeconds += float64(r.Job.GPUs) * (now - at).Seconds()
			delete(r.boundAt, p.Name)
		}
		delete(r.placed, p.Name)
		r.Evicted++
		changed = true
		if err := d.createPod(ctx, r.Job, i); err != nil && !apierrors.IsAlreadyExists(err) {
			return false, err
		}
	}
	return changed, nil
}

// updateStarts judges from each job's bound pods whether it reached its
// quorum (the watch decides for gangs when there is one), and whether
// evictions broke a started gang and it started again.
func (d *driver) updateStarts(bound map[string]int, now time.Duration) {
	for key, n := range bound {
		r := d.submitted[key]
		if n > r.MaxBound {
			r.MaxBound = n
		}
		if r.firstAt == 0 && n > 0 {
			r.firstAt = now
		}
		need := int(r.Job.MinMember)
		if need == 0 {
			need = r.Job.Replicas
		}
		if d.watch != nil && r.Job.MinMember > 0 {
			continue // the watch decides (below)
		}
		if r.QuorumAt == 0 && n >= need {
			r.QuorumAt = now
			r.Spread = now - r.firstAt
		}
	}
	for _, r := range d.res.Jobs {
		need := int(r.Job.MinMember)
		if need > 0 && d.watch != nil {
			first, quorum, restarted := d.watch.times(r.Job.Key())
			if r.QuorumAt == 0 && quorum > 0 {
				r.QuorumAt, r.Spread = quorum, quorum-first
			}
			r.RestartedAt = restarted
			continue
		}
		if need == 0 || r.QuorumAt == 0 || r.Completed > 0 {
			continue
		}
		switch n := bound[r.Job.Key()]; {
		case r.Evicted > 0 && n < need && !r.broken:
			r.broken = true
		case r.broken && n >= need:
			r.broken, r.RestartedAt = false, now
		}
	}
}

// measureJobs records each job's spread over domains and sub-groups, and
// adds the jobs waiting and the GPUs held, useful or stranded, to the sample.
func (d *driver) measureJobs(t *tally, now time.Duration) {
	sample := &t.sample
	for _, r := range d.res.Jobs {
		if level := d.sc.Level(r.Job.RequiredLevel()); level != nil && len(t.liveNodes[r.Job.Key()]) > 0 {
			domains := map[string]bool{}
			for _, n := range t.liveNodes[r.Job.Key()] {
				domains[d.nodeLabels()[n][level.NodeLabel]] = true
			}
			r.MaxLiveDomains = max(r.MaxLiveDomains, len(domains))
		}
		if size, name := r.Job.SubGroups(); size > 0 && len(t.liveRanks[r.Job.Key()]) > 0 {
			if level := d.sc.Level(name); level != nil {
				r.MaxSplitSubGroups = max(r.MaxSplitSubGroups, splitSubGroups(t.liveRanks[r.Job.Key()], size, func(node string) string {
					return d.nodeLabels()[node][level.NodeLabel]
				}))
			}
		}
		if !r.Ran() {
			sample.JobsWaiting++
			sample.LongestWait = max(sample.LongestWait, now-r.Submitted)
		}
		if r.Ran() || r.Job.MinMember == 0 {
			sample.UsefulGPU += t.jobGPU[r.Job.Key()]
		} else {
			sample.StrandedGPU += t.jobGPU[r.Job.Key()]
		}
	}
}

// finishSample judges fragmentation and why jobs wait on the nodes' free
// room, reads the scheduler's queue, checks NUMA and keeps the sample.
func (d *driver) finishSample(t *tally, now time.Duration) {
	sample := t.sample
	shapes := make([]metrics.Shape, 0, len(t.waitingShapes))
	for s := range t.waitingShapes {
		shapes = append(shapes, s)
	}
	rooms := make([]metrics.Room, 0, len(d.res.Nodes))
	nodes := d.untainted()
	for _, n := range nodes {
		u := t.nodeUsed[n.Name]
		rooms = append(rooms, metrics.Room{CPU: n.CPU - u.CPU, Memory: n.Memory - u.Memory, GPUs: n.GPUs - u.GPUs})
	}
	sample.FragGPU = metrics.FragmentedGPUs(rooms, shapes)
	var since time.Duration
	if n := len(d.res.Samples); n > 0 {
		since = now - d.res.Samples[n-1].At
	}
	sample.WaitCauses, sample.HeldBy = d.waitCauses(nodes, rooms, t.jobShape, t.jobWord, t.live, since)
	sample.IdleGPU = d.idleByDomain(nodes, rooms)
	if d.sched == nil {
		// Gathering every metric costs more than a sample; once a second
		// is enough for a mean over minutes.
		if d.queueRead.IsZero() || time.Since(d.queueRead) >= time.Second {
			d.queue, d.queueRead = schedulerQueue(), time.Now()
		}
		sample.SchedulerQueue = d.queue
	}
	d.checkNUMA(now, t.running)
	d.res.Samples = append(d.res.Samples, sample)
}

// untainted lists the nodes pods may be scheduled to.
func (d *driver) untainted() []NodeResult {
	var out []NodeResult
	for _, n := range d.res.Nodes {
		if !n.Tainted {
			out = append(out, n)
		}
	}
	return out
}

// idleByDomain sums the free GPUs of rooms (those of nodes, the untainted
// nodes) per domain of each network level above the host.
func (d *driver) idleByDomain(nodes []NodeResult, rooms []metrics.Room) map[string]int {
	if len(d.sc.Network) == 0 {
		return nil
	}
	out := map[string]int{}
	for i, n := range nodes {
		for _, l := range d.sc.Network {
			out[metrics.DomainKey(l.Name, n.Labels[l.NodeLabel])] += int(rooms[i].GPUs)
		}
	}
	return out
}

// waitCauses counts the jobs waiting at a sample by why (metrics.WaitCause), and
// those judged metrics.WaitRoomHeld by the scheduler's word on them: rooms are the
// free room of nodes (the untainted ones), jobShape the shape of each job's unbound pods,
// word the scheduler's last word on one of them, live each job's bound pods
// not yet completed. Each job's cause at the last sample is counted into its
// WaitedBy for since, the time from that sample to this one.
func (d *driver) waitCauses(nodes []NodeResult, rooms []metrics.Room, jobShape map[string]metrics.Shape, word map[string]string, live map[string]int, since time.Duration) (causes, heldBy map[string]int) {
	out, held := map[string]int{}, map[string]int{}
	// Each node's domain per level, made once per sample, not per job.
	domainsOf := map[string][]string{}
	for _, r := range d.res.Jobs {
		r.countWait(since)
		shape, unbound := jobShape[r.Job.Key()]
		if r.Ran() || !unbound {
			continue
		}
		need := 1
		if r.Job.MinMember > 0 {
			need = max(int(r.Job.MinMember)-live[r.Job.Key()], 1)
		}
		var domains []string
		if level := d.sc.Level(r.Job.RequiredLevel()); level != nil {
			if domains = domainsOf[level.Name]; domains == nil {
				domains = make([]string, len(nodes))
				for i, n := range nodes {
					domains[i] = n.Labels[level.NodeLabel]
				}
				domainsOf[level.Name] = domains
			}
		}
		cause := metrics.WaitCause(rooms, domains, shape, need)
		out[cause]++
		r.lastCause = cause
		if cause == metrics.WaitRoomHeld {
			held[word[r.Job.Key()]]++
			r.lastWord = word[r.Job.Key()]
		}
	}
	return out, held
}

// rankedPod is a running pod's rank and node.
type rankedPod struct {
	rank int
	node string
}

// splitSubGroups counts the sub-groups (ranks k×size … (k+1)×size−1) whose
// pods are in more than one domain (domain of a node).
func splitSubGroups(pods []rankedPod, size int, domain func(node string) string) int {
	domains := map[int]map[string]bool{}
	for _, p := range pods {
		k := p.rank / size
		if domains[k] == nil {
			domains[k] = map[string]bool{}
		}
		domains[k][domain(p.node)] = true
	}
	split := 0
	for _, d := range domains {
		if len(d) > 1 {
			split++
		}
	}
	return split
}

// nodeLabels maps node names to their labels.
func (d *driver) nodeLabels() map[string]map[string]string {
	if d.labels == nil {
		d.labels = map[string]map[string]string{}
		for _, n := range d.res.Nodes {
			d.labels[n.Name] = n.Labels
		}
	}
	return d.labels
}

// checkNUMA replays, on every NUMA node, the kubelet's admission of the pods
// running there in the order they started: each must get its zones.
func (d *driver) checkNUMA(now time.Duration, running map[string][]*v1.Pod) {
	// By node name: only the first violations are kept.
	for _, node := range slices.Sorted(maps.Keys(running)) {
		pods := running[node]
		n := d.numaNodes[node]
		if n == nil {
			continue
		}
		sort.Slice(pods, func(i, j int) bool {
			a, b := pods[i].Status.StartTime, pods[j].Status.StartTime
			if a == nil || b == nil || a.Equal(b) {
				return pods[i].Name < pods[j].Name
			}
			return a.Before(b)
		})
		charged := map[string]resources.List{}
		for _, p := range pods {
			assignment, ok, reason := n.Fit(p, charged)
			if !ok {
				msg := fmt.Sprintf("at %.1fs %s/%s on %s: %s", now.Seconds(), p.Namespace, p.Name, node, reason)
				if len(d.res.NUMAViolations) < 20 {
					d.res.NUMAViolations = append(d.res.NUMAViolations, msg)
				}
				break
			}
			for zone, l := range numa.Usage(assignment) {
				if charged[zone] == nil {
					charged[zone] = resources.List{}
				}
				charged[zone].Add(l)
			}
		}
	}
}

// requests returns the requests of a pod of job j (all its pods are alike).
func (d *driver) requests(j scenario.Job, p *v1.Pod) resources.List {
	if req, ok := d.podRequests[j.Key()]; ok {
		return req
	}
	req := resources.PodRequests(p)
	if d.podRequests == nil {
		d.podRequests = map[string]resources.List{}
	}
	d.podRequests[j.Key()] = req
	return req
}

// jobOf returns the pod's job (nil: not the replay's).
func (d *driver) jobOf(p *v1.Pod) *JobResult {
	if r, ok := d.jobs[p.UID]; ok {
		return r
	}
	r := d.submitted[p.Namespace+"/"+p.Labels[jobLabel]]
	if r != nil {
		d.jobs[p.UID] = r
	}
	return r
}

// podWord is metrics.SchedulerWord of one version of a pod.
type podWord struct {
	resourceVersion, word string
}

// schedulerWord is metrics.SchedulerWord, computed once per version of the pod.
func (d *driver) schedulerWord(p *v1.Pod) string {
	if w, ok := d.words[p.UID]; ok && w.resourceVersion == p.ResourceVersion {
		return w.word
	}
	w := metrics.SchedulerWord(p)
	d.words[p.UID] = podWord{p.ResourceVersion, w}
	return w
}

// schedulerQueue reads the in-process scheduler's pending pods by queue
// from its metrics (nil when they cannot be read).
func schedulerQueue() map[string]int {
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		return nil
	}
	for _, f := range families {
		if f.GetName() != "scheduler_pending_pods" {
			continue
		}
		out := map[string]int{}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "queue" {
					out[l.GetValue()] = int(m.GetGauge().GetValue())
				}
			}
		}
		return out
	}
	return nil
}
