// Package testcluster runs a real Kubernetes control plane in-process (embedded
// etcd and kube-apiserver), installs the phalanx CRDs, creates nodes, and runs
// the phalanx scheduler in-process or as the built binary. It is the one
// harness of the integration tests, the simulator and the benchmarks.
package testcluster

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	kubeapiservertesting "k8s.io/kubernetes/cmd/kube-apiserver/app/testing"
	"k8s.io/kubernetes/test/utils/ktesting"
	pgclientset "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"

	"github.com/phalanx-sched/phalanx/internal/testcluster/kcm"
	"github.com/phalanx-sched/phalanx/manifests"
	phalanxclientset "github.com/phalanx-sched/phalanx/pkg/generated/clientset/versioned"
)

// TB is what the harness needs from a test (or from the simulator's Runner).
type TB = ktesting.TB

// Cluster is a running in-process control plane.
type Cluster struct {
	// tb is the test (or runner) the cluster reports to.
	tb TB
	// Config is an admin client config; CRDConfig speaks JSON for CRDs.
	Config    *rest.Config
	CRDConfig *rest.Config
	Client    kubernetes.Interface
	PodGroups pgclientset.Interface
	Phalanx   phalanxclientset.Interface
	Dynamic   dynamic.Interface
	// Kubeconfig is a file for out-of-process clients (the scheduler binary).
	Kubeconfig string
	// Dir is scratch space removed at Stop.
	Dir string
	// APIServer is the in-process kube-apiserver (nil for Connect). For a
	// Restartable cluster it is the current one: RestartAPIServer replaces it.
	APIServer *kubeapiservertesting.TestServer

	mu    sync.Mutex
	stops []func()
	kcm   *kcm.Manager
	// restart is set for a Restartable cluster (restart.go).
	restart *restartable
}

// Options tune Start.
type Options struct {
	// APIServerFlags are extra kube-apiserver flags.
	APIServerFlags []string
	// SkipCRDs leaves manifests/crds uninstalled.
	SkipCRDs bool
	// Restartable puts a reverse proxy in front of the kube-apiserver:
	// Kubeconfig, Config and every client of the Cluster talk to the proxy,
	// so RestartAPIServer can replace the server (e.g. with other
	// --runtime-config) while clients and schedulers keep their connection
	// settings. See restart.go.
	Restartable bool
}

// Start runs etcd and kube-apiserver and installs the CRDs. Stop tears it down;
// for tests, tb.Cleanup does it too.
func Start(tb TB, opts Options) (*Cluster, error) {
	dir, err := os.MkdirTemp("", "phalanx-cluster-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, tb: tb}
	c.onStop(func() { _ = os.RemoveAll(dir) })
	tb.Cleanup(c.Stop)

	etcdURL, stopEtcd, err := startEtcd(filepath.Join(dir, "etcd"))
	if err != nil {
		c.Stop()
		return nil, fmt.Errorf("starting etcd: %w", err)
	}
	c.onStop(stopEtcd)

	storage := storagebackend.NewDefaultConfig(path.Join("/", uuid.New().String(), "registry"), nil)
	storage.Transport.ServerList = []string{etcdURL}
	flags := append([]string{
		// Without kubelets and controllers these would keep nodes tainted
		// and pods waiting for service accounts.
		"--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
	}, opts.APIServerFlags...)
	var clientConfig *rest.Config
	if opts.Restartable {
		if clientConfig, err = c.startRestartable(storage, flags); err != nil {
			c.Stop()
			return nil, err
		}
	} else {
		server, err := kubeapiservertesting.StartTestServer(tb, kubeapiservertesting.NewDefaultTestServerOptions(), flags, storage)
		if err != nil {
			c.Stop()
			return nil, fmt.Errorf("starting kube-apiserver: %w", err)
		}
		c.onStop(server.TearDownFn)
		c.APIServer = &server
		clientConfig = server.ClientConfig
	}
	if err := c.setClients(clientConfig); err != nil {
		c.Stop()
		return nil, err
	}
	if c.Kubeconfig, err = writeKubeconfig(dir, c.Config); err != nil {
		c.Stop()
		return nil, err
	}
	if !opts.SkipCRDs {
		if err := c.InstallCRDs(context.Background()); err != nil {
			c.Stop()
			return nil, err
		}
	}
	return c, nil
}

func (c *Cluster) onStop(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stops = append(c.stops, f)
}

// Stop tears everything down in reverse order of start. It is idempotent.
func (c *Cluster) Stop() {
	c.mu.Lock()
	stops := c.stops
	c.stops = nil
	c.mu.Unlock()
	for i := len(stops) - 1; i >= 0; i-- {
		stops[i]()
	}
}

// InstallCRDs creates every CRD of manifests/crds and waits until each is
// established.
func (c *Cluster) InstallCRDs(ctx context.Context) error {
	entries, err := manifests.CRDs.ReadDir("crds")
	if err != nil {
		return err
	}
	var docs [][]byte
	for _, e := range entries {
		raw, err := manifests.CRDs.ReadFile("crds/" + e.Name())
		if err != nil {
			return err
		}
		docs = append(docs, raw)
	}
	return c.InstallCRDYAML(ctx, docs...)
}

func startEtcd(dir string) (string, func(), error) {
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		ports, err := freePorts(2)
		if err != nil {
			return "", nil, err
		}
		cfg := embed.NewConfig()
		cfg.Name = "phalanx-test"
		cfg.Dir = dir
		cfg.UnsafeNoFsync = true
		cfg.LogLevel = "error"
		// etcd logs expected shutdown errors at error level; tests do not need them.
		cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
		clientURL := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))}
		peerURL := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))}
		cfg.ListenClientUrls = []url.URL{clientURL}
		cfg.AdvertiseClientUrls = []url.URL{clientURL}
		cfg.ListenPeerUrls = []url.URL{peerURL}
		cfg.AdvertisePeerUrls = []url.URL{peerURL}
		cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
		e, err := embed.StartEtcd(cfg)
		if err != nil {
			lastErr = err
			_ = os.RemoveAll(dir)
			continue
		}
		select {
		case <-e.Server.ReadyNotify():
		case <-time.After(60 * time.Second):
			e.Close()
			return "", nil, fmt.Errorf("etcd did not become ready")
		}
		return clientURL.String(), e.Close, nil
	}
	return "", nil, lastErr
}

func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func writeKubeconfig(dir string, cfg *rest.Config) (string, error) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["phalanx"] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthorityData: cfg.CAData,
		TLSServerName:            cfg.ServerName,
		InsecureSkipTLSVerify:    cfg.Insecure,
	}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{
		Token:                 cfg.BearerToken,
		ClientCertificateData: cfg.CertData,
		ClientKeyData:         cfg.KeyData,
	}
	kc.Contexts["phalanx"] = &clientcmdapi.Context{Cluster: "phalanx", AuthInfo: "admin"}
	kc.CurrentContext = "phalanx"
	p := filepath.Join(dir, "kubeconfig")
	return p, clientcmd.WriteToFile(*kc, p)
}
