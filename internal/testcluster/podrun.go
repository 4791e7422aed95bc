package testcluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/phalanx-sched/phalanx/internal/testcluster/podrun"
)

type (
	// PodRun describes one container of a rendered pod spec to run as a
	// local process the way the kubelet would (podrun.Run).
	PodRun = podrun.Run
	// PodProcess is a running PodRun.
	PodProcess = podrun.Process
)

// BwrapAvailable reports whether bubblewrap can run here (hack/ensure-deb.sh
// installs it).
func BwrapAvailable() error { return podrun.BwrapAvailable() }

// RunPod starts a PodRun and waits until its readiness probe passes (if it
// has one). It stops with the cluster.
func (c *Cluster) RunPod(ctx context.Context, r PodRun) (*PodProcess, error) {
	return podrun.Start(ctx, podrun.Env{
		Dir:      c.Dir,
		Endpoint: c.APIServerEndpoint,
		Token:    c.ServiceAccountToken,
		OnStop:   c.onStop,
	}, r)
}

// APIServerEndpoint returns the in-process API server's host and port and the
// CA bundle that verifies its serving certificate, as a pod sees them
// (KUBERNETES_SERVICE_HOST/PORT and the ServiceAccount's ca.crt).
func (c *Cluster) APIServerEndpoint() (host string, port int, ca []byte, err error) {
	if c.APIServer == nil {
		return "", 0, nil, fmt.Errorf("not an in-process cluster")
	}
	certFile := c.APIServer.ServerOpts.SecureServing.ServerCert.CertKey.CertFile
	if certFile == "" {
		certFile = filepath.Join(c.APIServer.ServerOpts.SecureServing.ServerCert.CertDirectory,
			c.APIServer.ServerOpts.SecureServing.ServerCert.PairName+".crt")
	}
	if ca, err = os.ReadFile(certFile); err != nil {
		return "", 0, nil, fmt.Errorf("API server serving certificate: %w", err)
	}
	return "127.0.0.1", c.APIServer.ServerOpts.SecureServing.BindPort, ca, nil
}

// ServiceAccountToken requests a token for a ServiceAccount (TokenRequest),
// as the kubelet does for a projected token volume.
func (c *Cluster) ServiceAccountToken(ctx context.Context, namespace, name string) (string, error) {
	tr, err := c.Client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](6 * 3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("TokenRequest for %s/%s: %w", namespace, name, err)
	}
	return tr.Status.Token, nil
}

// WriteTokenKubeconfig writes a kubeconfig that authenticates with token only.
func (c *Cluster) WriteTokenKubeconfig(path, token string) error {
	host, port, ca, err := c.APIServerEndpoint()
	if err != nil {
		return err
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://" + net.JoinHostPort(host, strconv.Itoa(port)), CertificateAuthorityData: ca}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kc.CurrentContext = "c"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return err
	}
	return os.Chmod(path, 0o644)
}
