package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"

	"github.com/phalanx-sched/phalanx/internal/testcluster"
)

// startExisting connects to a cluster where the chart is installed
// (hack/e2e-kind.sh). Only this differs from startLocal.
func startExisting(t *testing.T, kubeconfig string) *Env {
	t.Helper()
	c, err := testcluster.Connect(t, kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.StartKwokFor(fakeNodeAnnotation + "=fake"); err != nil {
		t.Fatal(err)
	}
	env := &Env{Cluster: c, Mode: envOr("PHALANX_E2E_MODE", modeSecond), Namespace: envOr("PHALANX_E2E_NAMESPACE", "phalanx-system")}
	leaseNS, leaseName := env.Namespace, "phalanx-scheduler"
	if env.Mode == modeReplace {
		leaseNS, leaseName = "kube-system", "kube-scheduler"
	}
	leader := func(ctx context.Context) (*corev1.Pod, error) {
		lease, err := c.Client.CoordinationV1().Leases(leaseNS).Get(ctx, leaseName, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if lease.Spec.HolderIdentity == nil {
			return nil, fmt.Errorf("lease %s/%s has no holder", leaseNS, leaseName)
		}
		podNS := env.Namespace
		if env.Mode == modeReplace {
			podNS = "kube-system"
		}
		return c.Client.CoreV1().Pods(podNS).Get(ctx, podName(*lease.Spec.HolderIdentity), metav1.GetOptions{})
	}
	env.isPhalanxLeader = func(ctx context.Context, holder string) (bool, error) {
		ns := env.Namespace
		if env.Mode == modeReplace {
			ns = "kube-system"
		}
		pod, err := c.Client.CoreV1().Pods(ns).Get(ctx, podName(holder), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return len(pod.Spec.Containers) > 0 && len(pod.Spec.Containers[0].Command) > 0 &&
			pod.Spec.Containers[0].Command[0] == "/phalanx-scheduler", nil
	}
	// A port-forward to the leader's secure port, through the API server.
	env.metricsURL = func(ctx context.Context) (string, func(), error) {
		pod, err := leader(ctx)
		if err != nil {
			return "", nil, err
		}
		u := c.Client.CoreV1().RESTClient().Post().Resource("pods").Namespace(pod.Namespace).Name(pod.Name).SubResource("portforward").URL()
		transport, upgrader, err := spdy.RoundTripperFor(c.Config)
		if err != nil {
			return "", nil, err
		}
		dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, (*url.URL)(u))
		stop, ready := make(chan struct{}), make(chan struct{})
		fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:10259"}, stop, ready, io.Discard, io.Discard)
		if err != nil {
			return "", nil, err
		}
		errc := make(chan error, 1)
		go func() { errc <- fw.ForwardPorts() }()
		select {
		case <-ready:
		case err := <-errc:
			return "", nil, err
		}
		ports, err := fw.GetPorts()
		if err != nil {
			close(stop)
			return "", nil, err
		}
		return fmt.Sprintf("https://127.0.0.1:%d", ports[0].Local), func() { close(stop) }, nil
	}
	env.logs = func(ctx context.Context) (map[string]string, error) {
		out := map[string]string{}
		for _, ns := range []string{env.Namespace, "kube-system"} {
			pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=phalanx"})
			if err != nil {
				return nil, err
			}
			for _, p := range pods.Items {
				b, err := c.Client.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
				if err != nil {
					return nil, err
				}
				out[ns+"/"+p.Name] = string(b)
			}
		}
		return out, nil
	}
	return env
}

func apiextensionsClient(c *testcluster.Cluster) (apiextensionsclient.Interface, error) {
	return apiextensionsclient.NewForConfig(c.Config)
}
