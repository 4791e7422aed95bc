package apiproxy

import (
	"bufio"
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// server is a stand-in kube-apiserver: it answers with its name, the
// credentials it was sent, the method and the path.
func server(t *testing.T, name string, handler http.HandlerFunc) *rest.Config {
	t.Helper()
	if handler == nil {
		handler = func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "%s %s %s %s", name, r.Header.Get("Authorization"), r.Method, r.URL.Path)
		}
	}
	s := httptest.NewTLSServer(handler)
	t.Cleanup(s.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})
	return &rest.Config{Host: s.URL, BearerToken: name + "-admin", TLSClientConfig: rest.TLSClientConfig{CAData: ca}}
}

func newProxy(t *testing.T) *Proxy {
	t.Helper()
	p, err := New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// do sends a request to the proxy with cfg's credentials.
func do(t *testing.T, ctx context.Context, cfg *rest.Config, method, path string) (*http.Response, error) {
	t.Helper()
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, method, cfg.Host+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return client.Do(req)
}

// body returns the response's status code and body.
func body(t *testing.T, res *http.Response, err error) (int, string) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, string(b)
}

// call sends a request and returns the answer's code and body.
func call(t *testing.T, ctx context.Context, cfg *rest.Config, method, path string) (int, string) {
	t.Helper()
	res, err := do(t, ctx, cfg, method, path)
	return body(t, res, err)
}

func status(t *testing.T, raw string) metav1.Status {
	t.Helper()
	var s metav1.Status
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		t.Fatalf("not a Status: %q: %v", raw, err)
	}
	return s
}

// TestForwardsWithTheServersCredentials: the proxy takes its own token and
// sends the server's admin credentials instead, to the current server.
func TestForwardsWithTheServersCredentials(t *testing.T) {
	p := newProxy(t)
	if err := p.SwitchTo(server(t, "a", nil)); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if code, got := call(t, ctx, p.ClientConfig(), http.MethodGet, "/api/v1/pods"); code != http.StatusOK || got != "a Bearer a-admin GET /api/v1/pods" {
		t.Fatalf("got %d %q", code, got)
	}
	if err := p.SwitchTo(server(t, "b", nil)); err != nil {
		t.Fatal(err)
	}
	if _, got := call(t, ctx, p.ClientConfig(), http.MethodPost, "/apis/x"); got != "b Bearer b-admin POST /apis/x" {
		t.Fatalf("after SwitchTo: %q", got)
	}
}

// TestRefusesOtherTokens: a request without the proxy's token is refused as
// the kube-apiserver would refuse it, and never forwarded.
func TestRefusesOtherTokens(t *testing.T) {
	p := newProxy(t)
	forwarded := false
	if err := p.SwitchTo(server(t, "a", func(http.ResponseWriter, *http.Request) { forwarded = true })); err != nil {
		t.Fatal(err)
	}
	cfg := p.ClientConfig()
	cfg.BearerToken = "wrong"
	code, raw := call(t, context.Background(), cfg, http.MethodGet, "/api")
	if s := status(t, raw); code != http.StatusUnauthorized || s.Reason != metav1.StatusReasonUnauthorized || s.Code != http.StatusUnauthorized {
		t.Fatalf("got %d %+v", code, s)
	}
	if forwarded {
		t.Fatal("a request with a wrong token was forwarded")
	}
}

// TestWaitsForAServer: with no server yet (or held), requests wait rather
// than fail, and one switched in answers them.
func TestWaitsForAServer(t *testing.T) {
	p := newProxy(t)
	short, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := do(t, short, p.ClientConfig(), http.MethodGet, "/api"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("with no server: %v, want the client's deadline", err)
	}
	done := make(chan string, 1)
	go func() {
		res, err := do(t, context.Background(), p.ClientConfig(), http.MethodGet, "/api")
		if err != nil {
			done <- err.Error()
			return
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		done <- string(b)
	}()
	if err := p.SwitchTo(server(t, "a", nil)); err != nil {
		t.Fatal(err)
	}
	if got := <-done; got != "a Bearer a-admin GET /api" {
		t.Fatalf("the waiting request got %q", got)
	}
	p.Hold()
	short, cancel = context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := do(t, short, p.ClientConfig(), http.MethodGet, "/api"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("held: %v, want the client's deadline", err)
	}
}

// TestFailAnswers503: after Fail, requests get 503 with Retry-After and the
// reason, until the next SwitchTo.
func TestFailAnswers503(t *testing.T) {
	p := newProxy(t)
	p.Fail(errors.New("the new server did not start"))
	res, err := do(t, context.Background(), p.ClientConfig(), http.MethodGet, "/api")
	if err != nil {
		t.Fatal(err)
	}
	retry := res.Header.Get("Retry-After")
	code, raw := body(t, res, nil)
	if s := status(t, raw); code != http.StatusServiceUnavailable || retry != "1" || s.Message != "the new server did not start" || s.Reason != metav1.StatusReasonServiceUnavailable {
		t.Fatalf("got %d Retry-After %q %+v", code, retry, s)
	}
	if err := p.SwitchTo(server(t, "a", nil)); err != nil {
		t.Fatal(err)
	}
	if code, _ := call(t, context.Background(), p.ClientConfig(), http.MethodGet, "/api"); code != http.StatusOK {
		t.Fatalf("after SwitchTo: %d", code)
	}
}

// TestSwitchToAfterClose: a closed proxy takes no server and answers nothing.
func TestSwitchToAfterClose(t *testing.T) {
	p := newProxy(t)
	p.Close()
	if err := p.SwitchTo(server(t, "a", nil)); !errors.Is(err, errProxyClosed) {
		t.Fatalf("SwitchTo after Close: %v", err)
	}
	if _, err := p.current(context.Background()); !errors.Is(err, errProxyClosed) {
		t.Fatalf("current after Close: %v", err)
	}
	if res, err := do(t, context.Background(), p.ClientConfig(), http.MethodGet, "/api"); err == nil {
		res.Body.Close()
		t.Fatalf("a closed proxy answered %d", res.StatusCode)
	}
	p.Close() // idempotent
}

// stuck is a server that never answers: it reports each request and waits
// until the request ends.
func stuck(t *testing.T, got chan<- string) *rest.Config {
	return server(t, "stuck", func(w http.ResponseWriter, r *http.Request) {
		got <- r.Method
		<-r.Context().Done()
	})
}

// TestReplacedMidRequest: a read the old server never answered goes to the
// new one; a write gets 503 with Retry-After (it may have been done).
func TestReplacedMidRequest(t *testing.T) {
	for _, tc := range []struct {
		method   string
		wantCode int
		wantBody string
	}{
		{http.MethodGet, http.StatusOK, "b Bearer b-admin GET /api"},
		{http.MethodPost, http.StatusServiceUnavailable, "the kube-apiserver is restarting"},
	} {
		t.Run(tc.method, func(t *testing.T) {
			p := newProxy(t)
			reached := make(chan string, 1)
			if err := p.SwitchTo(stuck(t, reached)); err != nil {
				t.Fatal(err)
			}
			type answer struct {
				code int
				body string
			}
			done := make(chan answer, 1)
			go func() {
				res, err := do(t, context.Background(), p.ClientConfig(), tc.method, "/api")
				if err != nil {
					done <- answer{body: err.Error()}
					return
				}
				defer res.Body.Close()
				b, _ := io.ReadAll(res.Body)
				done <- answer{res.StatusCode, string(b)}
			}()
			<-reached
			if err := p.SwitchTo(server(t, "b", nil)); err != nil {
				t.Fatal(err)
			}
			got := <-done
			if got.code != tc.wantCode || !strings.Contains(got.body, tc.wantBody) {
				t.Fatalf("got %d %q, want %d %q", got.code, got.body, tc.wantCode, tc.wantBody)
			}
		})
	}
}

// TestStreamEndsCleanly: a response being streamed (a watch) when its
// server is replaced ends as if the server had finished it, after what was
// already sent.
func TestStreamEndsCleanly(t *testing.T) {
	p := newProxy(t)
	err := p.SwitchTo(server(t, "watch", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "event 1")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	if err != nil {
		t.Fatal(err)
	}
	res, err := do(t, context.Background(), p.ClientConfig(), http.MethodGet, "/api/v1/pods?watch=true")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	r := bufio.NewReader(res.Body)
	if line, err := r.ReadString('\n'); err != nil || line != "event 1\n" {
		t.Fatalf("first event: %q %v (streamed at once?)", line, err)
	}
	p.Hold()
	if rest, err := io.ReadAll(r); err != nil || len(rest) != 0 {
		t.Fatalf("after the server went: %q, %v; want a clean end", rest, err)
	}
}

// TestConnTracker: closeAll closes every connection dialed, and nothing is
// dialed after it.
func TestConnTracker(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 3)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	tr := &connTracker{conns: map[*trackedConn]struct{}{}}
	ctx := context.Background()
	a, err := tr.dial(ctx, "tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b, err := tr.dial(ctx, "tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if len(tr.conns) != 1 {
		t.Fatalf("%d connections tracked after one closed, want 1", len(tr.conns))
	}
	tr.closeAll()
	if _, err := a.Write([]byte("x")); err == nil {
		t.Fatal("a connection still writes after closeAll")
	}
	if _, err := tr.dial(ctx, "tcp", l.Addr().String()); !errors.Is(err, errReplaced) {
		t.Fatalf("dial after closeAll: %v", err)
	}
	for range 2 {
		(<-accepted).Close()
	}
}
