package apiproxy

import (
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
)

// backend forwards to one kube-apiserver. stop ends everything it
// forwards and closes its connections.
type backend struct {
	ctx       context.Context
	cancel    context.CancelFunc
	conns     *connTracker
	transport http.RoundTripper
	proxy     *httputil.ReverseProxy
}

func newBackend(cfg *rest.Config) (*backend, error) {
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
	b := &backend{ctx: ctx, cancel: cancel, conns: conns, transport: transport}
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

func (b *backend) stop() {
	b.cancel()
	b.conns.closeAll()
	utilnet.CloseIdleConnectionsFor(b.transport)
}

// errorHandler answers a request the backend did not answer.
func (b *backend) errorHandler(w http.ResponseWriter, r *http.Request, err error) {
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
