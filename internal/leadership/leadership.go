// Package leadership tells whether this process is the scheduler replica
// that schedules. kube-scheduler fills a standby replica's informers and runs
// PreEnqueue on every pod it hears of before it leads, so without this a
// standby would write its own stale view of gangs (conditions, events) over
// the leader's, clear the leader's nominations, and evict gangs it sees
// partly bound.
package leadership

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

// Poll is how often a replica under leader election reads its Lease.
const Poll = 2 * time.Second

// Leadership is one process's leadership. The zero value is not usable; use New.
type Leadership struct {
	ctx context.Context
	// client gives the client that reads the Lease, once there is one.
	client func() kubernetes.Interface

	// once reads the published config (then elect and the Lease are fixed).
	once  sync.Once
	elect bool
	// lease and identity: kube-scheduler's holder identity is the hostname,
	// "_" and a UUID.
	namespace, name, hostname string
	leading                   atomic.Bool
	// looping: the scheduling loop has run a cycle (LoopStarted).
	looping atomic.Bool
	// mu guards onLead, run when the process starts leading.
	mu     sync.Mutex
	onLead []func()
}

// New returns the leadership of a process whose background work runs until
// ctx ends; client is asked for the Lease reader when leadership is first read.
func New(ctx context.Context, client func() kubernetes.Interface) *Leadership {
	return &Leadership{ctx: ctx, client: client}
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
func (l *Leadership) Leading() bool {
	l.once.Do(func() {
		if cfg, ok := readConfigz(); ok {
			le := cfg.LeaderElection
			l.elect = le.LeaderElect == nil || *le.LeaderElect
			l.namespace, l.name = le.ResourceNamespace, le.ResourceName
			l.hostname, _ = os.Hostname()
		}
		var client kubernetes.Interface
		if l.client != nil {
			client = l.client()
		}
		if l.elect && client != nil {
			go l.poll(l.ctx, client)
		}
	})
	return !l.elect || l.leading.Load()
}

// CycleRan records that this process runs scheduling cycles, which
// kube-scheduler does only once it leads (it exits when it loses the Lease,
// so leading never ends in one process).
func (l *Leadership) CycleRan() {
	if !l.looping.Load() {
		l.looping.Store(true)
	}
	if !l.leading.Load() {
		l.start()
	}
}

// LoopStarted reports whether the scheduling loop has run a cycle. Before
// it has, nothing can plan a gang, and kube-scheduler's start (or a standby
// replica) lists every node while the pods wait in its queue.
func (l *Leadership) LoopStarted() bool { return l.looping.Load() }

// OnLead registers f to run when the process starts leading.
func (l *Leadership) OnLead(f func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.onLead = append(l.onLead, f)
}

// start turns leading on once and runs the callbacks.
func (l *Leadership) start() {
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

// poll reads the Lease until this host holds it (or a scheduling cycle has
// shown that it leads): a standby with nothing to schedule still learns it.
func (l *Leadership) poll(ctx context.Context, client kubernetes.Interface) {
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
	}, Poll)
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
