package testcluster

// A Restartable cluster (Options.Restartable) lets a test replace its
// kube-apiserver while everything else keeps running: a kube-apiserver's
// served APIs (--runtime-config, --feature-gates) are fixed when it starts,
// so a test of how phalanx reacts to an API group that starts or stops being
// served needs a new server, but the scheduler under test must keep its
// kubeconfig and its process.
//
// Start then runs an HTTPS reverse proxy on a free 127.0.0.1 port with a
// self-signed certificate. Cluster.Kubeconfig, Cluster.Config and every client
// of the Cluster point at the proxy, with its CA and a bearer token only the
// proxy accepts. The proxy forwards each request to the current kube-apiserver
// with that server's admin (loopback) credentials.
//
// RestartAPIServer stops the server and starts another on the same etcd and
// storage prefix, so every object (CRDs included) is still there. While it
// does, the proxy holds new requests; the requests it was forwarding to the
// old server end: a watch's response ends as if the server had closed it, so
// clients (informers) re-list and re-watch, and their requests wait for the
// new server. Upgraded connections (websockets) end too.
//
// APIServerEndpoint (what pods run by the harness use, with their own
// ServiceAccount tokens) still names the current server itself, not the
// proxy: such clients do not survive a restart.

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/component-base/featuregate"
	kubeapiservertesting "k8s.io/kubernetes/cmd/kube-apiserver/app/testing"
)

// restartable is the state of a Restartable cluster.
type restartable struct {
	tb      TB
	storage *storagebackend.Config
	// flags are Start's kube-apiserver flags; each server gets them first.
	flags []string
	proxy *apiProxy

	// mu serialises RestartAPIServer and the final stop.
	mu     sync.Mutex
	server *kubeapiservertesting.TestServer
	// serverGates are the values before the current server started of the
	// feature gates it changed.
	serverGates gateSnapshot
	stopped     bool
}

// startRestartable starts the proxy and the first kube-apiserver behind it
// and returns the client config of the proxy. Stop closes the proxy, then
// tears down the current server and puts back the feature gates it changed.
func (c *Cluster) startRestartable(storage *storagebackend.Config, flags []string) (*rest.Config, error) {
	r := &restartable{tb: c.tb, storage: storage, flags: slices.Clone(flags)}
	c.restart = r
	c.onStop(r.stop)
	proxy, err := newAPIProxy()
	if err != nil {
		return nil, fmt.Errorf("starting the kube-apiserver proxy: %w", err)
	}
	r.proxy = proxy
	c.onStop(proxy.Close)

	r.mu.Lock()
	defer r.mu.Unlock()
	server, err := r.startServer(r.flags)
	if err != nil {
		return nil, fmt.Errorf("starting kube-apiserver: %w", err)
	}
	c.APIServer = server
	if err := proxy.switchTo(server.ClientConfig); err != nil {
		return nil, err
	}
	return proxy.clientConfig(), nil
}

// startServer starts a kube-apiserver and records the feature gates it
// changes. r.mu is held.
func (r *restartable) startServer(flags []string) (*kubeapiservertesting.TestServer, error) {
	before := snapshotGates()
	server, err := kubeapiservertesting.StartTestServer(r.tb, kubeapiservertesting.NewDefaultTestServerOptions(), flags, r.storage)
	// Even a server that failed may have set gates.
	r.serverGates = before.changedIn(snapshotGates())
	if err != nil {
		return nil, err
	}
	r.server = &server
	return r.server, nil
}

// stopServer tears down the current kube-apiserver, if any, and puts back the
// feature gates it changed. r.mu is held.
func (r *restartable) stopServer() error {
	if s := r.server; s != nil {
		r.server = nil
		s.TearDownFn()
	}
	err := r.serverGates.restore()
	r.serverGates = gateSnapshot{}
	if err != nil {
		return fmt.Errorf("restoring the feature gates: %w", err)
	}
	return nil
}

// stop is the final stop (Cluster.Stop).
func (r *restartable) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = true
	if err := r.stopServer(); err != nil {
		r.tb.Errorf("stopping kube-apiserver: %v", err)
	}
}

// RestartAPIServer replaces the kube-apiserver of a Restartable cluster: it
// stops the current server, puts back the feature gates that server changed
// (see gateSnapshot), starts a new server on the same etcd and storage prefix
// with Start's flags plus flags (flags of an earlier restart are not kept),
// waits until it is healthy and every established CRD is served again, and
// then lets the proxy forward to it.
//
// Meanwhile the proxy holds new requests, ends the requests it was forwarding
// to the old server (watches end cleanly, so clients re-list and re-watch;
// reads are retried on the new server; other requests get 503 with
// Retry-After, which client-go retries) and closes all its connections to the
// old server. Cluster.APIServer is the new server afterwards; do not read it
// while a restart runs.
//
// If the new server does not start, the proxy answers 503 until a later
// RestartAPIServer succeeds.
func (c *Cluster) RestartAPIServer(ctx context.Context, flags ...string) error {
	r := c.restart
	if r == nil {
		return errors.New("RestartAPIServer: the cluster was not started with Options.Restartable")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return errors.New("RestartAPIServer: the cluster is stopped")
	}
	began := time.Now()
	r.proxy.hold()
	if err := r.stopServer(); err != nil {
		r.proxy.fail(err)
		return err
	}
	all := append(slices.Clone(r.flags), flags...)
	server, err := r.startServer(all)
	if err != nil {
		err = fmt.Errorf("restarting kube-apiserver with %v: %w", all, err)
		r.proxy.fail(err)
		return err
	}
	c.APIServer = server
	// Switch even if the CRDs are late: the server is up.
	crdErr := waitCRDsServed(ctx, server.ClientConfig)
	if err := r.proxy.switchTo(server.ClientConfig); err != nil {
		return err
	}
	if crdErr != nil {
		return fmt.Errorf("kube-apiserver restarted, but: %w", crdErr)
	}
	r.tb.Logf("kube-apiserver restarted in %v with flags %v", time.Since(began).Round(time.Millisecond), all)
	return nil
}

// waitCRDsServed waits until every established CRD in etcd is served by the
// server of cfg in each of its served versions: in discovery and for a list.
// A new server loads CRDs from etcd a moment after it reports healthy.
func waitCRDsServed(ctx context.Context, cfg *rest.Config) error {
	ax, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var pending error
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		crds, err := ax.ApiextensionsV1().CustomResourceDefinitions().List(ctx, metav1.ListOptions{})
		if err != nil {
			pending = err
			return false, nil
		}
		for _, crd := range crds.Items {
			if crd.DeletionTimestamp != nil || !crdEstablished(&crd) {
				continue
			}
			for _, v := range crd.Spec.Versions {
				if !v.Served {
					continue
				}
				gvr := schema.GroupVersionResource{Group: crd.Spec.Group, Version: v.Name, Resource: crd.Spec.Names.Plural}
				if pending = resourceServed(ctx, disc, dyn, gvr); pending != nil {
					return false, nil
				}
			}
		}
		return true, nil
	})
	if err != nil && pending != nil {
		return fmt.Errorf("CRDs not served: %w (last: %v)", err, pending)
	}
	return err
}

func crdEstablished(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, cond := range crd.Status.Conditions {
		if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

// resourceServed returns nil when discovery lists gvr and a list of it works.
func resourceServed(ctx context.Context, disc discovery.DiscoveryInterface, dyn dynamic.Interface, gvr schema.GroupVersionResource) error {
	list, err := disc.ServerResourcesForGroupVersion(gvr.GroupVersion().String())
	if err != nil {
		return fmt.Errorf("discovery of %s: %w", gvr.GroupVersion(), err)
	}
	if !slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == gvr.Resource }) {
		return fmt.Errorf("discovery of %s does not list %s yet", gvr.GroupVersion(), gvr.Resource)
	}
	if _, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		return fmt.Errorf("listing %s: %w", gvr, err)
	}
	return nil
}

// gateSnapshot records feature gates of the process.
//
// Feature gates are process-global: the in-process kube-apiserver applies its
// --feature-gates (and --emulated-version) to
// k8s.io/apiserver/pkg/util/feature.DefaultMutableFeatureGate, which every
// server, scheduler and controller of this process reads, and
// kubeapiservertesting.StartTestServer only undoes that when the test ends
// (tb.Cleanup). It also starts each server from the gates as they are, so a
// server restarted without --feature-gates=X=true would still see X from the
// previous one. A Restartable cluster therefore records the gates before each
// server starts and, when that server stops (at a restart or at Stop), puts
// back those the server changed; gates changed by others (e.g. an in-process
// scheduler's plugins.SetFeatureDefaults) stay. So each server sees exactly
// its own flags, and after Stop the gates are as before Start. An in-process
// scheduler sharing the process does see the server's gates change with
// each restart. --emulated-version differing between restarts is not
// supported: StartTestServer's own test cleanup then fails the test.
type gateSnapshot struct {
	enabled   map[featuregate.Feature]bool
	explicit  map[featuregate.Feature]bool
	emulation *version.Version
	minCompat *version.Version
}

func snapshotGates() gateSnapshot {
	g := utilfeature.DefaultMutableFeatureGate
	s := gateSnapshot{
		enabled:   map[featuregate.Feature]bool{},
		explicit:  map[featuregate.Feature]bool{},
		emulation: g.EmulationVersion(),
		minCompat: g.MinCompatibilityVersion(),
	}
	for f := range g.GetAll() {
		s.enabled[f] = g.Enabled(f)
		s.explicit[f] = g.ExplicitlySet(f)
	}
	return s
}

// changedIn returns the part of s that differs in after.
func (s gateSnapshot) changedIn(after gateSnapshot) gateSnapshot {
	d := gateSnapshot{enabled: map[featuregate.Feature]bool{}, explicit: map[featuregate.Feature]bool{}}
	if !after.emulation.EqualTo(s.emulation) || !after.minCompat.EqualTo(s.minCompat) {
		d.emulation, d.minCompat = s.emulation, s.minCompat
	}
	for f, v := range s.enabled {
		if a, ok := after.enabled[f]; !ok || a != v {
			d.enabled[f], d.explicit[f] = v, s.explicit[f]
		}
	}
	return d
}

// restore sets every gate of s that changed back to its recorded value, and
// back to "not set" (its default) when it was not set.
func (s gateSnapshot) restore() error {
	g := utilfeature.DefaultMutableFeatureGate
	if s.emulation != nil && (!g.EmulationVersion().EqualTo(s.emulation) || !g.MinCompatibilityVersion().EqualTo(s.minCompat)) {
		if err := g.SetEmulationVersionAndMinCompatibilityVersion(s.emulation, s.minCompat); err != nil {
			return err
		}
	}
	changed := map[string]bool{}
	var unset []featuregate.Feature
	for f, v := range s.enabled {
		if g.Enabled(f) == v {
			continue
		}
		changed[string(f)] = v
		if !s.explicit[f] {
			unset = append(unset, f)
		}
	}
	if len(changed) == 0 {
		return nil
	}
	// All at once, so that dependent gates never disagree.
	if err := g.SetFromMap(changed); err != nil {
		return err
	}
	for _, f := range unset {
		if err := g.ResetFeatureValueToDefault(f); err != nil {
			return err
		}
	}
	return nil
}

// apiProxy is the TLS reverse proxy in front of a Restartable cluster's
// kube-apiserver.
type apiProxy struct {
	token  string
	caData []byte
	host   string
	server *http.Server

	mu sync.Mutex
	// backend is where requests go; nil while a restart runs.
	backend *proxyBackend
	// down is why there is no backend when a restart failed.
	down   error
	closed bool
	// changed is closed (and replaced) whenever the state above changes.
	changed chan struct{}
	once    sync.Once
}

var (
	errProxyClosed = errors.New("the kube-apiserver proxy is closed")
	errReplaced    = errors.New("the kube-apiserver was replaced")
)

func newAPIProxy() (*apiProxy, error) {
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("127.0.0.1", []net.IP{net.ParseIP("127.0.0.1")}, []string{"localhost"})
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	token := make([]byte, 32)
	if _, err := rand.Read(token); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &apiProxy{
		token:   hex.EncodeToString(token),
		caData:  certPEM,
		host:    "https://" + l.Addr().String(),
		changed: make(chan struct{}),
	}
	p.server = &http.Server{
		Handler:           p,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 30 * time.Second,
		// Clients that hang up mid-handshake are no news.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	go func() { _ = p.server.ServeTLS(l, "", "") }()
	return p, nil
}

// clientConfig is an admin client config for the proxy.
func (p *apiProxy) clientConfig() *rest.Config {
	return &rest.Config{
		Host:            p.host,
		BearerToken:     p.token,
		TLSClientConfig: rest.TLSClientConfig{CAData: p.caData},
	}
}

// signalLocked wakes the requests that wait for a backend.
func (p *apiProxy) signalLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// switchTo makes the server of cfg (an admin config) the backend.
func (p *apiProxy) switchTo(cfg *rest.Config) error {
	b, err := newProxyBackend(cfg)
	if err != nil {
		p.fail(err)
		return err
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		b.stop()
		return errProxyClosed
	}
	old := p.backend
	p.backend, p.down = b, nil
	p.signalLocked()
	p.mu.Unlock()
	if old != nil {
		old.stop()
	}
	return nil
}

// hold makes new requests wait for the next switchTo and ends everything
// forwarded to the current backend.
func (p *apiProxy) hold() {
	p.mu.Lock()
	old := p.backend
	p.backend, p.down = nil, nil
	p.mu.Unlock()
	if old != nil {
		old.stop()
	}
}

// fail makes requests fail with err (503) until the next switchTo.
func (p *apiProxy) fail(err error) {
	p.mu.Lock()
	old := p.backend
	p.backend, p.down = nil, err
	p.signalLocked()
	p.mu.Unlock()
	if old != nil {
		old.stop()
	}
}

// Close ends every request and connection and stops listening.
func (p *apiProxy) Close() {
	p.once.Do(func() {
		p.mu.Lock()
		old := p.backend
		p.backend, p.closed = nil, true
		p.signalLocked()
		p.mu.Unlock()
		if old != nil {
			old.stop()
		}
		_ = p.server.Close()
	})
}

// current returns the backend, waiting while a restart runs.
func (p *apiProxy) current(ctx context.Context) (*proxyBackend, error) {
	for {
		p.mu.Lock()
		b, down, closed, changed := p.backend, p.down, p.closed, p.changed
		p.mu.Unlock()
		switch {
		case closed:
			return nil, errProxyClosed
		case b != nil:
			return b, nil
		case down != nil:
			return nil, down
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (p *apiProxy) authorized(r *http.Request) bool {
	want := "Bearer " + p.token
	return subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte(want)) == 1
}

// retryKey keys the *bool by which a backend's error handler asks ServeHTTP
// to send a request again, to the next backend.
type retryKey struct{}

func (p *apiProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !p.authorized(r) {
		writeStatus(w, http.StatusUnauthorized, metav1.StatusReasonUnauthorized, "Unauthorized", false)
		return
	}
	for {
		b, err := p.current(r.Context())
		if err != nil {
			if r.Context().Err() == nil {
				writeStatus(w, http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, err.Error(), true)
			}
			return
		}
		retry := false
		b.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), retryKey{}, &retry)))
		if !retry {
			return
		}
	}
}

// proxyBackend forwards to one kube-apiserver. stop ends everything it
// forwards and closes its connections.
type proxyBackend struct {
	ctx       context.Context
	cancel    context.CancelFunc
	conns     *connTracker
	transport http.RoundTripper
	proxy     *httputil.ReverseProxy
}

func newProxyBackend(cfg *rest.Config) (*proxyBackend, error) {
	target, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, err
	}
	conns := &connTracker{conns: map[*trackedConn]struct{}{}}
	cfg = rest.CopyConfig(cfg)
	// A dialer of its own: the transport is not shared with the server's
	// loopback clients (client-go caches transports by TLS config), and
	// stop can close every connection it made.
	cfg.Dial = conns.dial
	transport, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &proxyBackend{ctx: ctx, cancel: cancel, conns: conns, transport: transport}
	b.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			// The transport authenticates as the server's admin.
			pr.Out.Header.Del("Authorization")
		},
		Transport: &backendTransport{rt: transport, gen: ctx},
		// Watches and other streams: pass every write on at once.
		FlushInterval: -1,
		ErrorHandler:  b.errorHandler,
		ErrorLog:      log.New(io.Discard, "", 0),
	}
	return b, nil
}

func (b *proxyBackend) stop() {
	b.cancel()
	b.conns.closeAll()
	utilnet.CloseIdleConnectionsFor(b.transport)
}

// errorHandler answers a request the backend did not answer.
func (b *proxyBackend) errorHandler(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		return // the client went away
	}
	if b.ctx.Err() != nil {
		// The server was replaced before it answered. A read goes to the
		// next server; anything else may or may not have been done, so the
		// client decides (client-go retries on 503 with Retry-After).
		if retry, ok := r.Context().Value(retryKey{}).(*bool); ok && (r.Method == http.MethodGet || r.Method == http.MethodHead || r.Method == http.MethodOptions) {
			*retry = true
			return
		}
		writeStatus(w, http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, "the kube-apiserver is restarting", true)
		return
	}
	writeStatus(w, http.StatusBadGateway, metav1.StatusReasonInternalError, "kube-apiserver proxy: "+err.Error(), false)
}

// backendTransport ties each request to its backend's life: when the backend
// stops, requests end, and a response being streamed (a watch) ends as if the
// server had finished it, rather than with an error.
type backendTransport struct {
	rt  http.RoundTripper
	gen context.Context
}

func (t *backendTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.gen.Err() != nil {
		return nil, errReplaced
	}
	ctx, cancel := context.WithCancel(req.Context())
	stop := context.AfterFunc(t.gen, cancel)
	res, err := t.rt.RoundTrip(req.WithContext(ctx))
	if err != nil {
		stop()
		cancel()
		return nil, err
	}
	if res.StatusCode == http.StatusSwitchingProtocols {
		// An upgraded connection: ReverseProxy needs the body as it is (an
		// io.ReadWriteCloser); stop closes the tracked connection under it.
		context.AfterFunc(req.Context(), func() { stop(); cancel() })
		return res, nil
	}
	res.Body = &backendBody{ReadCloser: res.Body, gen: t.gen, release: func() { stop(); cancel() }}
	return res, nil
}

type backendBody struct {
	io.ReadCloser
	gen     context.Context
	release func()
}

func (b *backendBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF && b.gen.Err() != nil {
		err = io.EOF
	}
	return n, err
}

func (b *backendBody) Close() error {
	err := b.ReadCloser.Close()
	b.release()
	return err
}

// connTracker dials the connections of one backend and closes them all.
type connTracker struct {
	mu     sync.Mutex
	conns  map[*trackedConn]struct{}
	closed bool
}

func (t *connTracker) dial(ctx context.Context, network, address string) (net.Conn, error) {
	c, err := (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		_ = c.Close()
		return nil, errReplaced
	}
	tc := &trackedConn{Conn: c, t: t}
	t.conns[tc] = struct{}{}
	return tc, nil
}

func (t *connTracker) closeAll() {
	t.mu.Lock()
	t.closed = true
	conns := t.conns
	t.conns = map[*trackedConn]struct{}{}
	t.mu.Unlock()
	for c := range conns {
		_ = c.Conn.Close()
	}
}

type trackedConn struct {
	net.Conn
	t *connTracker
}

func (c *trackedConn) Close() error {
	c.t.mu.Lock()
	delete(c.t.conns, c)
	c.t.mu.Unlock()
	return c.Conn.Close()
}

// writeStatus answers with a metav1.Status, as the kube-apiserver would.
func writeStatus(w http.ResponseWriter, code int, reason metav1.StatusReason, message string, retryAfter bool) {
	w.Header().Set("Content-Type", "application/json")
	if retryAfter {
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(&metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure,
		Message:  message,
		Reason:   reason,
		Code:     int32(code),
	})
}
