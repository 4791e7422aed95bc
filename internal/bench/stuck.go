package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	pgv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/phalanx-sched/phalanx/internal/testcluster"
)

// describeUnbound writes why a timed-out pass's pods are unbound: the
// unbound pods grouped by kind (gang member or plain), scheduling gates and
// PodScheduled condition, with how many gangs each group spans. A pass that
// times out is a bug to find, and the pods are deleted right after.
func describeUnbound(ctx context.Context, c *testcluster.Cluster, ns string, out io.Writer) error {
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	type group struct {
		pods  int
		gangs map[string]bool
	}
	groups := map[string]*group{}
	partial := map[string][2]int{} // gang → bound, unbound
	for i := range pods.Items {
		pod := &pods.Items[i]
		gang := pod.Labels[pgv1alpha1.PodGroupLabel]
		counts := partial[gang]
		if pod.Spec.NodeName != "" {
			counts[0]++
			partial[gang] = counts
			continue
		}
		counts[1]++
		partial[gang] = counts
		kind := "plain"
		if gang != "" {
			kind = "member"
		}
		key := fmt.Sprintf("%s gates=%d %s", kind, len(pod.Spec.SchedulingGates), podScheduled(pod))
		g := groups[key]
		if g == nil {
			g = &group{gangs: map[string]bool{}}
			groups[key] = g
		}
		g.pods++
		if gang != "" {
			g.gangs[gang] = true
		}
	}
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if groups[keys[i]].pods != groups[keys[j]].pods {
			return groups[keys[i]].pods > groups[keys[j]].pods
		}
		return keys[i] < keys[j]
	})
	fmt.Fprintf(out, "unbound pods of %s:\n", ns)
	for _, k := range keys {
		fmt.Fprintf(out, "  %6d pods, %4d gangs: %s\n", groups[k].pods, len(groups[k].gangs), k)
	}
	split := 0
	for gang, counts := range partial {
		if gang != "" && counts[0] > 0 && counts[1] > 0 {
			split++
		}
	}
	fmt.Fprintf(out, "  gangs with members both bound and unbound: %d\n", split)
	return nil
}

// podScheduled is a pod's PodScheduled condition, its message cut short.
func podScheduled(pod *v1.Pod) string {
	for _, c := range pod.Status.Conditions {
		if c.Type != v1.PodScheduled {
			continue
		}
		msg := c.Message
		if len(msg) > 160 {
			msg = msg[:160] + "…"
		}
		return fmt.Sprintf("PodScheduled=%s/%s %q", c.Status, c.Reason, msg)
	}
	return "no PodScheduled condition"
}

// keepStuck keeps a timed-out scheduler's goroutine dump and log in dir
// (the cluster's directory, where the log is, goes with the run) and says
// where they are.
func keepStuck(ctx context.Context, sched *childScheduler, name, dir string) (string, error) {
	raw, err := get(ctx, sched.client, sched.base+"/debug/pprof/goroutine?debug=2")
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	prefix := filepath.Join(dir, strings.ReplaceAll(name, "/", "-"))
	if err := os.WriteFile(prefix+"-goroutines.txt", raw, 0o644); err != nil {
		return "", err
	}
	log, err := os.ReadFile(sched.log)
	if err != nil {
		return "", err
	}
	return prefix + "-{goroutines.txt,scheduler.log}", os.WriteFile(prefix+"-scheduler.log", log, 0o644)
}
