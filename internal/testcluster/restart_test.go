package testcluster

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/kubernetes/pkg/features"
)

// TestRestartAPIServer: a Restartable cluster's kubeconfig survives two
// kube-apiserver restarts that turn scheduling.k8s.io/v1beta1 on and off
// again: objects stay, discovery follows the flags, a watch open across a
// restart ends and a new one works, and the feature gates come back.
func TestRestartAPIServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	gateBefore := utilfeature.DefaultFeatureGate.Enabled(features.GenericWorkload)
	began := time.Now()
	c, err := Start(t, Options{Restartable: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Start: %v", time.Since(began).Round(time.Millisecond))
	// A gate set by someone else while the cluster runs, as an in-process
	// scheduler's plugins.SetFeatureDefaults does: restarts leave it.
	other := !utilfeature.DefaultFeatureGate.Enabled(features.NominatedNodeNameForExpectation)
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.NominatedNodeNameForExpectation, other)
	otherKept := func() {
		t.Helper()
		if utilfeature.DefaultFeatureGate.Enabled(features.NominatedNodeNameForExpectation) != other {
			t.Fatal("a restart reset NominatedNodeNameForExpectation, which the server's flags did not set")
		}
	}

	// Everything below goes through the kubeconfig, as a scheduler would.
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	proxyURL, _ := url.Parse(cfg.Host)
	serverURL, _ := url.Parse(c.APIServer.ClientConfig.Host)
	if proxyURL.Host == serverURL.Host || cfg.BearerToken == "" || len(cfg.CAData) == 0 {
		t.Fatalf("kubeconfig points at %s (server %s): want the proxy, with a token and its CA", cfg.Host, serverURL.Host)
	}
	if c.Config.Host != cfg.Host {
		t.Fatalf("Cluster.Config points at %s, not the proxy %s", c.Config.Host, cfg.Host)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cms := cs.CoreV1().ConfigMaps(metav1.NamespaceDefault)

	// The proxy takes its token only.
	bad := *cfg
	bad.BearerToken = "wrong"
	if badCS, err := kubernetes.NewForConfig(&bad); err != nil {
		t.Fatal(err)
	} else if _, err := badCS.CoreV1().ConfigMaps(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
		t.Fatalf("a wrong token: got %v, want Unauthorized", err)
	}

	served := func(want bool, resources ...string) {
		t.Helper()
		list, err := cs.Discovery().ServerResourcesForGroupVersion("scheduling.k8s.io/v1beta1")
		if !want {
			if !apierrors.IsNotFound(err) {
				t.Fatalf("scheduling.k8s.io/v1beta1: got %v, %v; want NotFound", list, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("scheduling.k8s.io/v1beta1 not served: %v", err)
		}
		for _, r := range resources {
			if !slices.ContainsFunc(list.APIResources, func(a metav1.APIResource) bool { return a.Name == r }) {
				t.Fatalf("scheduling.k8s.io/v1beta1 does not list %s: %v", r, list.APIResources)
			}
		}
	}
	create := func(name string) *corev1.ConfigMap {
		t.Helper()
		cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"k": name}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating ConfigMap %s: %v", name, err)
		}
		return cm
	}
	// added waits for w to report ConfigMap name.
	added := func(w watch.Interface, name string) {
		t.Helper()
		timeout := time.After(30 * time.Second)
		for {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					t.Fatalf("the watch ended before ConfigMap %s", name)
				}
				if cm, isCM := ev.Object.(*corev1.ConfigMap); isCM && ev.Type == watch.Added && cm.Name == name {
					return
				}
			case <-timeout:
				t.Fatalf("the watch did not report ConfigMap %s in 30s", name)
			}
		}
	}
	exist := func(names ...string) {
		t.Helper()
		for _, name := range names {
			cm, err := cms.Get(ctx, name, metav1.GetOptions{})
			if err != nil || cm.Data["k"] != name {
				t.Fatalf("ConfigMap %s: %v, %v", name, cm, err)
			}
		}
		// The Cluster's own clients go through the proxy too.
		if _, err := c.Client.CoreV1().ConfigMaps(metav1.NamespaceDefault).Get(ctx, names[0], metav1.GetOptions{}); err != nil {
			t.Fatalf("Cluster.Client: %v", err)
		}
		if _, err := c.PodGroups.SchedulingV1alpha1().PodGroups(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{}); err != nil {
			t.Fatalf("listing the PodGroup CRD: %v", err)
		}
	}
	restart := func(flags ...string) {
		t.Helper()
		began := time.Now()
		if err := c.RestartAPIServer(ctx, flags...); err != nil {
			t.Fatal(err)
		}
		t.Logf("RestartAPIServer(%v): %v", flags, time.Since(began).Round(time.Millisecond))
		if got := c.APIServer.ClientConfig.Host; got == serverURL.String() {
			t.Fatalf("Cluster.APIServer is still the old server %s", got)
		}
	}

	// An informer, as the scheduler has, follows across restarts.
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(metav1.NamespaceDefault))
	lister := factory.Core().V1().ConfigMaps().Lister()
	stopInformers := make(chan struct{})
	factory.Start(stopInformers)
	defer factory.Shutdown()
	defer close(stopInformers)
	factory.WaitForCacheSync(ctx.Done())
	cached := func(name string) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			_, err := lister.ConfigMaps(metav1.NamespaceDefault).Get(name)
			return err == nil, nil
		})
		if err != nil {
			t.Fatalf("the informer did not see ConfigMap %s: %v", name, err)
		}
	}

	first := create("before")
	cached("before")
	served(false)
	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: first.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ws := websocketWatch(t, cfg, "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion="+first.ResourceVersion)
	defer ws.Close()
	create("streamed")
	added(w, "streamed") // the proxy streams watch events as they come
	ws.wait(t, []byte(`"name":"streamed"`))

	restart("--runtime-config=scheduling.k8s.io/v1beta1=true", "--feature-gates=GenericWorkload=true")
	ended := time.After(30 * time.Second)
drain:
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				break drain
			}
			t.Logf("old watch: %s %T", ev.Type, ev.Object)
		case <-ended:
			t.Fatal("the watch opened before the restart did not end")
		}
	}
	ws.wait(t, nil) // the upgraded connection ends too
	exist("before", "streamed")
	served(true, "podgroups", "workloads")
	if !utilfeature.DefaultFeatureGate.Enabled(features.GenericWorkload) {
		t.Fatal("GenericWorkload off while the server runs with --feature-gates=GenericWorkload=true")
	}
	otherKept()
	if _, err := cs.SchedulingV1beta1().Workloads(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("listing Workloads: %v", err)
	}
	list, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w2, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Stop()
	create("after")
	added(w2, "after")
	cached("after")

	restart()
	exist("before", "streamed", "after")
	served(false)
	create("last")
	cached("last")
	if got := utilfeature.DefaultFeatureGate.Enabled(features.GenericWorkload); got != gateBefore {
		t.Fatalf("GenericWorkload %v after a restart without the flag, want %v as before Start", got, gateBefore)
	}
	otherKept()

	c.Stop()
	c.Stop() // once only
	if got := utilfeature.DefaultFeatureGate.Enabled(features.GenericWorkload); got != gateBefore {
		t.Fatalf("GenericWorkload %v after Stop, want %v", got, gateBefore)
	}
	otherKept()
	if err := c.RestartAPIServer(ctx); err == nil {
		t.Fatal("RestartAPIServer after Stop succeeded")
	}
	short, cancelShort := context.WithTimeout(ctx, 5*time.Second)
	defer cancelShort()
	if _, err := cms.Get(short, "before", metav1.GetOptions{}); err == nil {
		t.Fatal("the proxy still answers after Stop")
	}
}

// TestRestartAPIServerNotRestartable: only a Restartable cluster restarts.
func TestRestartAPIServerNotRestartable(t *testing.T) {
	c := &Cluster{}
	if err := c.RestartAPIServer(context.Background()); err == nil {
		t.Fatal("RestartAPIServer on a cluster started without Restartable succeeded")
	}
}

// wsWatch is a watch over a websocket (an upgraded connection) through the
// proxy, read as raw bytes.
type wsWatch struct {
	net.Conn
	r    *bufio.Reader
	seen []byte
}

func websocketWatch(t *testing.T, cfg *rest.Config, path string) *wsWatch {
	t.Helper()
	u, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(cfg.CAData)
	conn, err := tls.Dial("tcp", u.Host, &tls.Config{RootCAs: roots, NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	key := make([]byte, 16)
	_, _ = rand.Read(key)
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\nOrigin: https://%s\r\nAuthorization: Bearer %s\r\n\r\n",
		path, u.Host, base64.StdEncoding.EncodeToString(key), u.Host, cfg.BearerToken)
	r := bufio.NewReader(conn)
	res, err := http.ReadResponse(r, nil)
	if err != nil {
		conn.Close()
		t.Fatalf("websocket watch: %v", err)
	}
	if res.StatusCode != http.StatusSwitchingProtocols {
		conn.Close()
		t.Fatalf("websocket watch: %s", res.Status)
	}
	return &wsWatch{Conn: conn, r: r}
}

// wait reads until want has come (nil: until the connection ends).
func (w *wsWatch) wait(t *testing.T, want []byte) {
	t.Helper()
	_ = w.SetReadDeadline(time.Now().Add(30 * time.Second))
	buf := make([]byte, 4096)
	for want == nil || !bytes.Contains(w.seen, want) {
		n, err := w.r.Read(buf)
		w.seen = append(w.seen, buf[:n]...)
		if err == nil {
			continue
		}
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("websocket watch: nothing for 30s (waiting for %q)", want)
		}
		if want != nil {
			t.Fatalf("websocket watch ended waiting for %q: %v", want, err)
		}
		return
	}
}
