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
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	kubeapiservertesting "k8s.io/kubernetes/cmd/kube-apiserver/app/testing"

	"github.com/phalanx-sched/phalanx/internal/testcluster/apiproxy"
	"github.com/phalanx-sched/phalanx/internal/testcluster/gates"
)

// restartable is the state of a Restartable cluster.
type restartable struct {
	tb      TB
	storage *storagebackend.Config
	// flags are Start's kube-apiserver flags; each server gets them first.
	flags []string
	proxy *apiproxy.Proxy

	// mu serialises RestartAPIServer and the final stop.
	mu     sync.Mutex
	server *kubeapiservertesting.TestServer
	// serverGates are the values before the current server started of the
	// feature gates it changed.
	serverGates gates.Snapshot
	stopped     bool
}

// startRestartable starts the proxy and the first kube-apiserver behind it
// and returns the client config of the proxy. Stop closes the proxy, then
// tears down the current server and puts back the feature gates it changed.
func (c *Cluster) startRestartable(storage *storagebackend.Config, flags []string) (*rest.Config, error) {
	r := &restartable{tb: c.tb, storage: storage, flags: slices.Clone(flags)}
	c.restart = r
	c.onStop(r.stop)
	proxy, err := apiproxy.New()
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
	if err := proxy.SwitchTo(server.ClientConfig); err != nil {
		return nil, err
	}
	return proxy.ClientConfig(), nil
}

// startServer starts a kube-apiserver and records the feature gates it
// changes. r.mu is held.
func (r *restartable) startServer(flags []string) (*kubeapiservertesting.TestServer, error) {
	before := gates.Take()
	server, err := kubeapiservertesting.StartTestServer(r.tb, kubeapiservertesting.NewDefaultTestServerOptions(), flags, r.storage)
	// Even a server that failed may have set gates.
	r.serverGates = before.ChangedIn(gates.Take())
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
	err := r.serverGates.Restore()
	r.serverGates = gates.Snapshot{}
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
// (see gates.Snapshot), starts a new server on the same etcd and storage prefix
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
	r.proxy.Hold()
	if err := r.stopServer(); err != nil {
		r.proxy.Fail(err)
		return err
	}
	all := append(slices.Clone(r.flags), flags...)
	server, err := r.startServer(all)
	if err != nil {
		err = fmt.Errorf("restarting kube-apiserver with %v: %w", all, err)
		r.proxy.Fail(err)
		return err
	}
	c.APIServer = server
	// Switch even if the CRDs are late: the server is up.
	crdErr := waitCRDsServed(ctx, server.ClientConfig)
	if err := r.proxy.SwitchTo(server.ClientConfig); err != nil {
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
