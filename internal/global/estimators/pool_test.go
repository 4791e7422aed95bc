package estimators

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/phalanx-sched/phalanx/internal/estimator"
	"github.com/phalanx-sched/phalanx/internal/estimator/estimatortest"
	"github.com/phalanx-sched/phalanx/internal/estimator/karmadapb"
)

// fakeServices is the Services port over a map keyed namespace/name.
type fakeServices struct {
	mu   sync.Mutex
	svcs map[string]*v1.Service
	err  error
}

func (f *fakeServices) Service(namespace, name string) (*v1.Service, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	if s, ok := f.svcs[namespace+"/"+name]; ok {
		return s, nil
	}
	return nil, apierrors.NewNotFound(v1.Resource("services"), name)
}

func (f *fakeServices) set(svcs ...*v1.Service) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.svcs == nil {
		f.svcs = map[string]*v1.Service{}
	}
	for _, s := range svcs {
		f.svcs[s.Namespace+"/"+s.Name] = s
	}
}

// externalName is cluster's estimator Service under the default config,
// port 10352 forwarding to target on host.
func externalName(cluster, host string, target intstr.IntOrString) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "karmada-system", Name: "karmada-scheduler-estimator-" + cluster},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeExternalName, ExternalName: host,
			Ports: []v1.ServicePort{{Name: "grpc", Port: 10352, TargetPort: target}}},
	}
}

// serviceFor points cluster's Service at addr (host:port).
func serviceFor(t *testing.T, cluster, addr string) *v1.Service {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return externalName(cluster, host, intstr.FromInt32(int32(p)))
}

// canned answers sets: when block, never (it waits for the call to be
// cancelled); when hold is set, once hold is closed.
type canned struct {
	karmadapb.UnimplementedEstimatorServer
	sets  int32
	block bool
	hold  chan struct{}

	mu       sync.Mutex
	last     *karmadapb.MaxAvailableComponentSetsRequest
	kind     string
	ns, name string
	calls    int
	inFlight int
	peak     int
}

func (c *canned) MaxAvailableComponentSets(ctx context.Context, req *karmadapb.MaxAvailableComponentSetsRequest) (*karmadapb.MaxAvailableComponentSetsResponse, error) {
	kind, ns, name, _ := estimator.ObjectOf(ctx)
	c.mu.Lock()
	c.last, c.kind, c.ns, c.name = req, kind, ns, name
	c.calls++
	c.inFlight++
	c.peak = max(c.peak, c.inFlight)
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.inFlight--
		c.mu.Unlock()
	}()
	if c.block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if c.hold != nil {
		<-c.hold
	}
	return &karmadapb.MaxAvailableComponentSetsResponse{MaxSets: c.sets}, nil
}

func (c *canned) snapshot() (calls, inFlight, peak int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls, c.inFlight, c.peak
}

// countingListener counts accepted connections.
type countingListener struct {
	net.Listener
	accepted atomic.Int32
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

// serve runs srv on 127.0.0.1:0 until the test ends.
func serve(t *testing.T, srv karmadapb.EstimatorServer, opts ...grpc.ServerOption) (string, *countingListener) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lis := &countingListener{Listener: l}
	g := grpc.NewServer(opts...)
	karmadapb.RegisterEstimatorServer(g, srv)
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	return l.Addr().String(), lis
}

func newPool(t *testing.T, cfg Config, svcs Services) *Pool {
	t.Helper()
	p, err := New(cfg, svcs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func TestAddress(t *testing.T) {
	custom := Config{Namespace: "est", Prefix: "phalanx", Port: 9000, Timeout: time.Second}
	wrongType := externalName("a", "", intstr.FromInt32(10352))
	wrongType.Spec.Type = v1.ServiceTypeClusterIP
	otherPort := externalName("a", "est.a.example", intstr.FromInt32(7000))
	otherPort.Spec.Ports[0].Port = 8080
	for _, tc := range []struct {
		name    string
		cfg     Config
		svc     *v1.Service
		readErr error
		want    string // address, or a part of the error
		wantErr bool
	}{
		{name: "ExternalName", svc: externalName("a", "est.a.example", intstr.FromInt32(7000)), want: "est.a.example:7000"},
		{name: "wrong type", svc: wrongType, wantErr: true, want: `karmada-system/karmada-scheduler-estimator-a: type "ClusterIP"`},
		{name: "no such port", svc: otherPort, wantErr: true, want: "karmada-system/karmada-scheduler-estimator-a: no port 10352"},
		{name: "named targetPort", svc: externalName("a", "est.a.example", intstr.FromString("grpc")), wantErr: true,
			want: `karmada-system/karmada-scheduler-estimator-a: port 10352: targetPort "grpc" is not a port number`},
		{name: "absent", want: "karmada-scheduler-estimator-a.karmada-system.svc.cluster.local:10352"},
		{name: "absent, custom config", cfg: custom, want: "phalanx-a.est.svc.cluster.local:9000"},
		{name: "read error", readErr: errors.New("forbidden"), wantErr: true, want: "karmada-system/karmada-scheduler-estimator-a: forbidden"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			if cfg == (Config{}) {
				cfg = DefaultConfig()
			}
			svcs := &fakeServices{err: tc.readErr}
			if tc.svc != nil {
				svcs.set(tc.svc)
			}
			got, err := newPool(t, cfg, svcs).address("a")
			switch {
			case tc.wantErr && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("address: %q, %v; want an error with %q", got, err, tc.want)
			case !tc.wantErr && (err != nil || got != tc.want):
				t.Errorf("address: %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestFromLister(t *testing.T) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	if err := idx.Add(externalName("a", "est.a.example", intstr.FromInt32(7000))); err != nil {
		t.Fatal(err)
	}
	p := newPool(t, DefaultConfig(), FromLister(corelisters.NewServiceLister(idx)))
	for cluster, want := range map[string]string{
		"a": "est.a.example:7000",
		"b": "karmada-scheduler-estimator-b.karmada-system.svc.cluster.local:10352",
	} {
		if got, err := p.address(cluster); err != nil || got != want {
			t.Errorf("address(%s) = %q, %v; want %q", cluster, got, err, want)
		}
	}
}

func TestSetsSendsTheQuestion(t *testing.T) {
	gpu := v1.ResourceList{"nvidia.com/gpu": resource.MustParse("8"), v1.ResourceCPU: resource.MustParse("16")}
	for _, tc := range []struct {
		name string
		sets int32
		q    Question
	}{
		{name: "PyTorchJob", sets: 3, q: Question{Namespace: "team-a", Kind: "PyTorchJob", Name: "train",
			Components: []*karmadapb.Component{
				estimatortest.Component("master", 1, gpu, nil),
				estimatortest.Component("worker", 7, gpu, map[string]string{"leaf": "a"}),
			}}},
		{name: "nothing fits", sets: 0, q: Question{Namespace: "ml", Kind: "Job", Name: "batch-1",
			Components: []*karmadapb.Component{estimatortest.Component("job", 4, gpu, nil)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := &canned{sets: tc.sets}
			addr, _ := serve(t, srv)
			svcs := &fakeServices{}
			svcs.set(serviceFor(t, "member-1", addr))
			got, err := newPool(t, DefaultConfig(), svcs).Sets(context.Background(), "member-1", tc.q)
			if err != nil || got != tc.sets {
				t.Fatalf("Sets = %d, %v; want %d", got, err, tc.sets)
			}
			srv.mu.Lock()
			defer srv.mu.Unlock()
			if srv.kind != tc.q.Kind || srv.ns != tc.q.Namespace || srv.name != tc.q.Name {
				t.Errorf("object metadata read back as %q %q %q, want %q %q %q", srv.kind, srv.ns, srv.name, tc.q.Kind, tc.q.Namespace, tc.q.Name)
			}
			want := &karmadapb.MaxAvailableComponentSetsRequest{Cluster: "member-1", Namespace: tc.q.Namespace, Components: tc.q.Components}
			if !proto.Equal(srv.last, want) {
				t.Errorf("request = %v, want %v", srv.last, want)
			}
		})
	}
}

func TestSetsAllIsolatesFailures(t *testing.T) {
	okAddr, _ := serve(t, &canned{sets: 2})
	otherAddr, _ := serve(t, &canned{sets: 5})
	slowAddr, _ := serve(t, &canned{block: true})
	downAddr, err := estimatortest.FreeAddress()
	if err != nil {
		t.Fatal(err)
	}
	clusterIP := externalName("bad", "", intstr.FromInt32(10352))
	clusterIP.Spec.Type = v1.ServiceTypeClusterIP
	svcs := &fakeServices{}
	svcs.set(serviceFor(t, "ok", okAddr), serviceFor(t, "other", otherAddr), serviceFor(t, "slow", slowAddr),
		serviceFor(t, "down", downAddr), clusterIP)
	cfg := DefaultConfig()
	cfg.Timeout = 500 * time.Millisecond
	p := newPool(t, cfg, svcs)

	start := time.Now()
	got := p.SetsAll(context.Background(), []string{"ok", "slow", "down", "bad", "other", "ok"}, Question{Namespace: "ns", Kind: "Job", Name: "j"})
	if took := time.Since(start); took > cfg.Timeout+5*time.Second {
		t.Errorf("SetsAll took %v; the deadline is %v", took, cfg.Timeout)
	}
	if len(got) != 5 {
		t.Errorf("results for %d clusters, want 5 (duplicates once): %v", len(got), got)
	}
	for cluster, want := range map[string]struct {
		sets int32
		code codes.Code // of the error; OK for none
		text string     // in the error
	}{
		"ok":    {sets: 2},
		"other": {sets: 5},
		"slow":  {code: codes.DeadlineExceeded, text: "cluster slow"},
		"down":  {code: codes.Unavailable, text: "cluster down"},
		"bad":   {code: codes.Unknown, text: `karmada-scheduler-estimator-bad: type "ClusterIP"`},
	} {
		r := got[cluster]
		if want.code == codes.OK {
			if r.Err != nil || r.Sets != want.sets {
				t.Errorf("%s: %d, %v; want %d", cluster, r.Sets, r.Err, want.sets)
			}
			continue
		}
		if r.Err == nil || status.Code(r.Err) != want.code || !strings.Contains(r.Err.Error(), want.text) {
			t.Errorf("%s: error %v (code %v); want code %v with %q", cluster, r.Err, status.Code(r.Err), want.code, want.text)
		}
	}
}

func TestSetsAllBoundsConcurrency(t *testing.T) {
	// More clusters than slots, all served by one estimator.
	setup := func(t *testing.T, timeout time.Duration) (*canned, *Pool, []string) {
		srv := &canned{sets: 1, hold: make(chan struct{})}
		addr, _ := serve(t, srv)
		svcs := &fakeServices{}
		var clusters []string
		for i := range 2*maxInFlight + 8 {
			c := "c" + strconv.Itoa(i)
			clusters = append(clusters, c)
			svcs.set(serviceFor(t, c, addr))
		}
		cfg := DefaultConfig()
		cfg.Timeout = timeout
		return srv, newPool(t, cfg, svcs), clusters
	}

	t.Run("at most maxInFlight at once", func(t *testing.T) {
		srv, p, clusters := setup(t, 30*time.Second)
		// Release the held calls once the bound is reached: a handler
		// returns before its slot frees, so the server's peak is the bound.
		go func() {
			defer close(srv.hold)
			for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
				if _, inFlight, _ := srv.snapshot(); inFlight >= maxInFlight {
					return
				}
			}
		}()
		got := p.SetsAll(context.Background(), clusters, Question{Kind: "Job", Name: "j"})
		for c, r := range got {
			if r.Err != nil || r.Sets != 1 {
				t.Errorf("%s: %d, %v; want 1", c, r.Sets, r.Err)
			}
		}
		if calls, _, peak := srv.snapshot(); calls != len(clusters) || peak != maxInFlight {
			t.Errorf("server saw %d calls, %d at once; want %d, %d", calls, peak, len(clusters), maxInFlight)
		}
	})

	t.Run("queued past the deadline are not asked", func(t *testing.T) {
		srv, p, clusters := setup(t, 500*time.Millisecond)
		t.Cleanup(func() { close(srv.hold) }) // before the server stops
		got := p.SetsAll(context.Background(), clusters, Question{Kind: "Job", Name: "j"})
		notAsked := 0
		for c, r := range got {
			switch {
			case r.Err != nil && strings.Contains(r.Err.Error(), "cluster "+c+": not asked"):
				notAsked++
			case status.Code(r.Err) != codes.DeadlineExceeded:
				t.Errorf("%s: %d, %v; want a deadline error", c, r.Sets, r.Err)
			}
		}
		if len(got) != len(clusters) || notAsked == 0 {
			t.Errorf("%d results, %d not asked; want %d results, some not asked", len(got), notAsked, len(clusters))
		}
	})
}

func TestConnectionReuseRedialForgetClose(t *testing.T) {
	addrA, lisA := serve(t, &canned{sets: 1})
	addrB, lisB := serve(t, &canned{sets: 2})
	svcs := &fakeServices{}
	svcs.set(serviceFor(t, "m", addrA))
	p := newPool(t, DefaultConfig(), svcs)
	ctx := context.Background()
	ask := func(want int32) {
		t.Helper()
		if got, err := p.Sets(ctx, "m", Question{Kind: "Job", Name: "j"}); err != nil || got != want {
			t.Fatalf("Sets = %d, %v; want %d", got, err, want)
		}
	}
	cached := func() *grpc.ClientConn {
		p.mu.Lock()
		defer p.mu.Unlock()
		if c := p.conns["m"]; c != nil {
			return c.cc
		}
		return nil
	}

	ask(1)
	ask(1)
	first := cached()
	if n := lisA.accepted.Load(); n != 1 {
		t.Errorf("A accepted %d connections for two calls, want 1", n)
	}

	svcs.set(serviceFor(t, "m", addrB))
	ask(2)
	if first.GetState() != connectivity.Shutdown {
		t.Errorf("connection to A is %v after the Service moved, want Shutdown", first.GetState())
	}
	if n := lisB.accepted.Load(); n != 1 {
		t.Errorf("B accepted %d connections, want 1", n)
	}

	second := cached()
	p.Forget("m")
	if second.GetState() != connectivity.Shutdown || cached() != nil {
		t.Errorf("after Forget: connection %v, cached %v; want Shutdown and none", second.GetState(), cached())
	}
	ask(2)
	if n := lisB.accepted.Load(); n != 2 {
		t.Errorf("B accepted %d connections after Forget, want 2", n)
	}

	third := cached()
	p.Close()
	if third.GetState() != connectivity.Shutdown {
		t.Errorf("connection %v after Close, want Shutdown", third.GetState())
	}
	if _, err := p.Sets(ctx, "m", Question{Kind: "Job", Name: "j"}); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("Sets after Close: %v, want a closed pool error", err)
	}
}

func TestTLSWithClientCertRequired(t *testing.T) {
	files, err := estimatortest.WriteTLS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	creds, err := estimator.TLSFiles{CertFile: files.ServerCert, KeyFile: files.ServerKey, ClientCAFile: files.CA}.
		Credentials(estimator.Field{Cert: "cert", Key: "key", ClientCA: "ca"})
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := serve(t, &canned{sets: 4}, creds)
	svcs := &fakeServices{}
	svcs.set(serviceFor(t, "m", addr))
	for _, tc := range []struct {
		name   string
		tls    func(*Config)
		wantOK bool
	}{
		{name: "CA and client cert", wantOK: true, tls: func(c *Config) { c.CAFile, c.CertFile, c.KeyFile = files.CA, files.ClientCert, files.ClientKey }},
		{name: "skip verify and client cert", wantOK: true, tls: func(c *Config) { c.InsecureSkipVerify, c.CertFile, c.KeyFile = true, files.ClientCert, files.ClientKey }},
		{name: "CA without client cert", tls: func(c *Config) { c.CAFile = files.CA }},
		{name: "plaintext", tls: func(*Config) {}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tc.tls(&cfg)
			got, err := newPool(t, cfg, svcs).Sets(context.Background(), "m", Question{Kind: "Job", Name: "j"})
			if tc.wantOK && (err != nil || got != 4) {
				t.Errorf("Sets = %d, %v; want 4", got, err)
			}
			if !tc.wantOK && status.Code(err) != codes.Unavailable {
				t.Errorf("Sets = %d, %v; want the connection refused (Unavailable)", got, err)
			}
		})
	}
}
