package runtime

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/component-base/configz"
	"k8s.io/klog/v2"
)

// leaderPoll is how often a replica under leader election reads its Lease.
const leaderPoll = 2 * time.Second

// leadership tells whether this process is the replica that schedules.
// kube-scheduler fills a standby replica's informers and runs PreEnqueue on
// every pod it hears of before it leads, so without this a standby would
// write its own stale view of gangs (conditions, events) over the leader's,
// clear the leader's nominations, and evict gangs it sees partly bound.
type leadership struct {
	// once reads the published config (then elect and the Lease are fixed).
	once  sync.Once
	elect bool
	// lease and identity: kube-scheduler's holder identity is the hostname,
	// "_" and a UUID.
	namespace, name, hostname string
	leading                   atomic.Bool
	// mu guards onLead, run when the process starts leading.
	mu     sync.Mutex
	onLead []func()
}

// schedulerConfig is the part of the KubeSchedulerConfiguration that
// kube-scheduler publishes in configz (set in app.Run, before leader
// election and before the informers start).
type schedulerConfig struct {
	LeaderElection struct {
		LeaderElect       *bool  `json:"leaderElect"`
		ResourceName      string `json:"resourceName"`
		ResourceNamespace string `json:"resourceNamespace"`
	} `json:"leaderElection"`
}

// readConfigz returns the scheduler's published config; false when none is
// published (the framework run without kube-scheduler's app: tests, sim).
func readConfigz() (schedulerConfig, bool) {
	mux := http.NewServeMux()
	configz.InstallHandler(mux)
	w := &bufferWriter{header: http.Header{}}
	mux.ServeHTTP(w, &http.Request{Method: http.MethodGet, URL: &url.URL{Path: "/configz"}, Header: http.Header{}})
	var all map[string]json.RawMessage
	if err := json.Unmarshal(w.body, &all); err != nil {
		return schedulerConfig{}, false
	}
	raw, ok := all["componentconfig"]
	if !ok {
		return schedulerConfig{}, false
	}
	var cfg schedulerConfig
	return cfg, json.Unmarshal(raw, &cfg) == nil
}

// Leading reports whether this process schedules: always without leader
// election (or without kube-scheduler's app), else while its hostname holds
// the scheduler's Lease.
func (r *Runtime) Leading() bool {
	l := &r.leader
	l.once.Do(func() {
		if cfg, ok := readConfigz(); ok {
			le := cfg.LeaderElection
			l.elect = le.LeaderElect == nil || *le.LeaderElect
			l.namespace, l.name = le.ResourceNamespace, le.ResourceName
			l.hostname, _ = os.Hostname()
		}
		client := r.clients.Kube
		if fw := r.ports(); client == nil && fw != nil {
			client = fw.Client
		}
		if l.elect && client != nil {
			go l.poll(r.ctx, client)
		}
	})
	return !l.elect || l.leading.Load()
}

// MarkLeading records that this process runs scheduling cycles, which
// kube-scheduler does only once it leads (it exits when it loses the Lease,
// so leading never ends in one process).
func (r *Runtime) MarkLeading() {
	if !r.looping.Load() {
		r.looping.Store(true)
	}
	if !r.leader.leading.Load() {
		r.leader.start()
	}
}

// start turns leading on once and runs the callbacks.
func (l *leadership) start() {
	if l.leading.Swap(true) {
		return
	}
	l.mu.Lock()
	fs := append([]func(){}, l.onLead...)
	l.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

// LoopStarted reports whether the scheduling loop has run a cycle. Before
// it has, nothing can plan a gang, and kube-scheduler's start (or a standby
// replica) lists every node while the pods wait in its queue.
func (r *Runtime) LoopStarted() bool { return r.looping.Load() }

// OnLead registers f to run when the process starts leading.
func (r *Runtime) OnLead(f func()) {
	r.leader.mu.Lock()
	defer r.leader.mu.Unlock()
	r.leader.onLead = append(r.leader.onLead, f)
}

// poll reads the Lease until this host holds it (or a scheduling cycle has
// shown that it leads): a standby with nothing to schedule still learns it.
func (l *leadership) poll(ctx context.Context, client kubernetes.Interface) {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if !l.leading.Load() {
			lease, err := client.CoordinationV1().Leases(l.namespace).Get(ctx, l.name, metav1.GetOptions{})
			if err != nil || lease.Spec.HolderIdentity == nil || !strings.HasPrefix(*lease.Spec.HolderIdentity, l.hostname+"_") {
				return
			}
			klog.FromContext(ctx).V(2).Info("Leading: gang conditions, events and evictions are this replica's now", "lease", l.namespace+"/"+l.name)
			l.start()
		}
		stop()
	}, leaderPoll)
}

// bufferWriter is an in-memory http.ResponseWriter.
type bufferWriter struct {
	header http.Header
	body   []byte
}

func (w *bufferWriter) Header() http.Header { return w.header }
func (w *bufferWriter) WriteHeader(int)     {}
func (w *bufferWriter) Write(b []byte) (int, error) {
	w.body = append(w.body, b...)
	return len(b), nil
}
