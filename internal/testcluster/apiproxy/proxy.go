// Package apiproxy is the TLS reverse proxy in front of a restartable
// kube-apiserver: clients keep one address, CA and token while the server
// behind it is replaced; requests wait while there is none.
package apiproxy

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
)

// Proxy is the TLS reverse proxy in front of a restartable kube-apiserver.
// It accepts its own bearer token only and forwards with the current
// server's admin credentials.
type Proxy struct {
	token  string
	caData []byte
	host   string
	server *http.Server

	mu sync.Mutex
	// backend is where requests go; nil while a restart runs.
	backend *backend
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

// New starts a proxy on a free 127.0.0.1 port with a self-signed
// certificate. It has no backend (requests wait) until SwitchTo.
func New() (*Proxy, error) {
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
	p := &Proxy{
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

// ClientConfig is an admin client config for the proxy.
func (p *Proxy) ClientConfig() *rest.Config {
	return &rest.Config{
		Host:            p.host,
		BearerToken:     p.token,
		TLSClientConfig: rest.TLSClientConfig{CAData: p.caData},
	}
}

// signalLocked wakes the requests that wait for a backend.
func (p *Proxy) signalLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// SwitchTo makes the server of cfg (an admin config) the backend.
func (p *Proxy) SwitchTo(cfg *rest.Config) error {
	b, err := newBackend(cfg)
	if err != nil {
		p.Fail(err)
		return err
	}
	return p.replace(b, nil, true, false)
}

// Hold makes new requests wait for the next SwitchTo and ends everything
// forwarded to the current backend.
func (p *Proxy) Hold() {
	_ = p.replace(nil, nil, false, false)
}

// Fail makes requests fail with err (503) until the next SwitchTo.
func (p *Proxy) Fail(err error) {
	_ = p.replace(nil, err, true, false)
}

// Close ends every request and connection and stops listening.
func (p *Proxy) Close() {
	p.once.Do(func() {
		_ = p.replace(nil, nil, true, true)
		_ = p.server.Close()
	})
}

// replace sets the backend (or none, failing with down) under the lock,
// wakes waiting requests when signal, and stops the old backend outside the
// lock. A new backend after Close is stopped and refused.
func (p *Proxy) replace(b *backend, down error, signal, closing bool) error {
	p.mu.Lock()
	if p.closed && b != nil {
		p.mu.Unlock()
		b.stop()
		return errProxyClosed
	}
	old := p.backend
	p.backend, p.down = b, down
	p.closed = p.closed || closing
	if signal {
		p.signalLocked()
	}
	p.mu.Unlock()
	if old != nil {
		old.stop()
	}
	return nil
}

// current returns the backend, waiting while a restart runs.
func (p *Proxy) current(ctx context.Context) (*backend, error) {
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

func (p *Proxy) authorized(r *http.Request) bool {
	want := "Bearer " + p.token
	return subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte(want)) == 1
}

// retryKey keys the *bool by which a backend's error handler asks ServeHTTP
// to send a request again, to the next backend.
type retryKey struct{}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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
