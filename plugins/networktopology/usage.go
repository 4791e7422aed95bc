package networktopology

import (
	"maps"
	"sync"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/phalanx-sched/phalanx/internal/topology"
)

// usageCache computes, per domain of a level, the larger of its CPU and GPU
// used fractions, for every pod outside a gang. Summing every node for
// every pod cost 20 ms a pod at 10,000 nodes (the scale bench), so the sums
// are kept across cycles: a node is recounted only when its NodeInfo
// generation changed (one assumed pod changes one node).
type usageCache struct {
	mu    sync.Mutex
	tree  *topology.Tree
	level int
	// nodes is aligned with the snapshot's node list (stable while the set
	// of nodes is).
	nodes []nodeUsage
	sums  map[string]*usageSums
	// used is the last result; it is replaced, never changed, so a cycle's
	// scores may keep reading it.
	used map[string]float64
}

type usageSums struct{ cpuUsed, cpuAll, gpuUsed, gpuAll int64 }

type nodeUsage struct {
	node   *v1.Node
	gen    int64
	domain string
	sums   usageSums
}

// of returns the usage of the level's domains over nodes, the snapshot's
// whole node list.
func (c *usageCache) of(t *topology.Tree, level int, nodes []fwk.NodeInfo) map[string]float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tree != t || c.level != level || len(c.nodes) != len(nodes) {
		c.tree, c.level, c.used = t, level, nil
		c.nodes, c.sums = make([]nodeUsage, len(nodes)), map[string]*usageSums{}
	}
	changed := map[string]bool{}
	for i, ni := range nodes {
		cached := &c.nodes[i]
		if cached.node == ni.Node() && cached.gen == ni.GetGeneration() && c.used != nil {
			continue
		}
		c.add(cached, -1)
		changed[cached.domain] = true
		*cached = nodeUsage{node: ni.Node(), gen: ni.GetGeneration(), domain: domainAt(t, ni.Node().Name, level), sums: usageSums{
			cpuUsed: ni.GetRequested().GetMilliCPU(), cpuAll: ni.GetAllocatable().GetMilliCPU(),
			gpuUsed: ni.GetRequested().GetScalarResources()[gpuResource], gpuAll: ni.GetAllocatable().GetScalarResources()[gpuResource],
		}}
		c.add(cached, 1)
		changed[cached.domain] = true
	}
	delete(changed, "")
	if len(changed) == 0 && c.used != nil {
		return c.used
	}
	used := make(map[string]float64, len(c.sums))
	if c.used != nil {
		maps.Copy(used, c.used)
	}
	for d := range changed {
		a := c.sums[d]
		if a == nil {
			delete(used, d)
			continue
		}
		f := 0.0
		if a.cpuAll > 0 {
			f = float64(a.cpuUsed) / float64(a.cpuAll)
		}
		if a.gpuAll > 0 {
			f = max(f, float64(a.gpuUsed)/float64(a.gpuAll))
		}
		used[d] = f
	}
	c.used = used
	return used
}

// add adds (sign 1) or removes (-1) a node's share of its domain's sums.
func (c *usageCache) add(n *nodeUsage, sign int64) {
	if n.domain == "" {
		return
	}
	a := c.sums[n.domain]
	if a == nil {
		a = &usageSums{}
		c.sums[n.domain] = a
	}
	a.cpuUsed += sign * n.sums.cpuUsed
	a.cpuAll += sign * n.sums.cpuAll
	a.gpuUsed += sign * n.sums.gpuUsed
	a.gpuAll += sign * n.sums.gpuAll
	if a.cpuAll == 0 && a.gpuAll == 0 && a.cpuUsed == 0 && a.gpuUsed == 0 {
		delete(c.sums, n.domain)
	}
}

// domainAt is the node's domain of the level, "" if it has none.
func domainAt(t *topology.Tree, node string, level int) string {
	d := t.Domains(node)
	if level >= len(d) {
		return ""
	}
	return d[level]
}
