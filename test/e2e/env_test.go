package e2e

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/phalanx-sched/phalanx/internal/testcluster"
)

const (
	modeSecond  = "second-scheduler"
	modeReplace = "replace"
	// fakeNodeAnnotation marks the suite's nodes; kwok plays their kubelet.
	fakeNodeAnnotation = "kwok.x-k8s.io/node"
	// suiteTaint keeps everything but the suite's pods off its nodes.
	suiteTaint = "e2e.phalanx.dev/suite"
	// scenarioLabel pins a scenario's pods to its own nodes.
	scenarioLabel = "e2e.phalanx.dev/scenario"
)

// Env is what a scenario gets: a cluster with phalanx installed, however it
// got there.
type Env struct {
	*testcluster.Cluster
	Mode      string
	Namespace string // the release namespace
	// metricsURL returns the base URL of the phalanx leader's secure port and
	// a function that releases it (a port-forward on a real cluster).
	metricsURL func(ctx context.Context) (string, func(), error)
	// isPhalanxLeader tells whether the holder of a Lease is a phalanx
	// scheduler pod.
	isPhalanxLeader func(ctx context.Context, holder string) (bool, error)
	// logs returns the phalanx components' logs by name.
	logs func(ctx context.Context) (map[string]string, error)
}

// podName is the pod part of a leader-election holder identity (hostname_uuid).
func podName(holder string) string {
	name, _, _ := strings.Cut(holder, "_")
	return name
}

// scrape fetches the scheduler's /metrics as Prometheus would: HTTPS to the
// secure port with a ServiceAccount token bound to the chart's
// <fullname>-metrics-reader ClusterRole; the scheduler checks it with
// TokenReview and SubjectAccessReview.
func (e *Env) scrape(ctx context.Context, t *testing.T) string {
	t.Helper()
	token := e.scraperToken(ctx, t)
	base, release, err := e.metricsURL(ctx)
	if err != nil {
		t.Fatalf("metrics endpoint: %v", err)
	}
	defer release()
	client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s/metrics: %v", base, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s/metrics: %s: %s", base, resp.Status, body)
	}
	return string(body)
}

func (e *Env) scraperToken(ctx context.Context, t *testing.T) string {
	t.Helper()
	const sa = "phalanx-e2e-scraper"
	_, err := e.Client.CoreV1().ServiceAccounts(e.Namespace).Create(ctx, &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: e.Namespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	_, err = e.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: sa},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "phalanx-metrics-reader"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: e.Namespace}},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	token, err := e.ServiceAccountToken(ctx, e.Namespace, sa)
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// checkNoForbidden fails the test for every authorization failure a phalanx
// component logged: the chart's RBAC must cover what the binaries do.
func (e *Env) checkNoForbidden(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	logs, err := e.logs(ctx)
	if err != nil {
		t.Errorf("reading component logs: %v", err)
		return
	}
	for name, log := range logs {
		for _, line := range strings.Split(log, "\n") {
			if forbidden(line) {
				t.Errorf("%s was refused by the API server (RBAC): %s", name, line)
			}
		}
	}
}

func forbidden(line string) bool {
	l := strings.ToLower(line)
	return strings.Contains(l, "forbidden") || strings.Contains(l, " 403 ") || strings.Contains(l, "code 403") || strings.Contains(l, "status 403")
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func namespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}
