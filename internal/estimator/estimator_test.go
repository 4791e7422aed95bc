package estimator

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/pem"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/component-base/metrics/testutil"

	phalanxv1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/internal/estimator/estimatortest"
	"github.com/phalanx-sched/phalanx/internal/estimator/karmadapb"
	"github.com/phalanx-sched/phalanx/internal/gang"
)

func TestObjectOf(t *testing.T) {
	for _, tc := range []struct {
		md             string
		kind, ns, name string
		ok             bool
	}{
		{md: "kind=PyTorchJob, name=team-a/train", kind: "PyTorchJob", ns: "team-a", name: "train", ok: true},
		{md: "kind=ClusterRole, name=admin", kind: "ClusterRole", name: "admin", ok: true},
		{md: "name=team-a/train", ns: "team-a", name: "train"},
		{md: ""},
	} {
		ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("object", tc.md))
		kind, ns, name, ok := ObjectOf(ctx)
		if kind != tc.kind || ns != tc.ns || name != tc.name || ok != tc.ok {
			t.Errorf("ObjectOf(%q) = %q %q %q %v, want %q %q %q %v", tc.md, kind, ns, name, ok, tc.kind, tc.ns, tc.name, tc.ok)
		}
	}
}

func TestTemplateOf(t *testing.T) {
	// A PyTorchJob: the queue label on the object, the topology annotation
	// on the workers' pod template; other keys are not read.
	job := map[string]any{
		"metadata": map[string]any{"labels": map[string]any{phalanxv1alpha1.QueueLabel: "team-a", "app": "x"}},
		"spec": map[string]any{"pytorchReplicaSpecs": map[string]any{
			"Worker": map[string]any{"replicas": int64(4), "template": map[string]any{"metadata": map[string]any{
				"annotations": map[string]any{phalanxv1alpha1.TopologyRequiredAnnotation: "ib-cluster", phalanxv1alpha1.GangSizeAnnotation: "5"},
			}}},
		}},
	}
	got := TemplateOf(job)
	want := &Template{
		Labels:      map[string]string{phalanxv1alpha1.QueueLabel: "team-a"},
		Annotations: map[string]string{phalanxv1alpha1.TopologyRequiredAnnotation: "ib-cluster"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("TemplateOf = %+v, want %+v", got, want)
	}
}

// Two pod templates setting the same key: the answer must not depend on
// map iteration order (the later one in sorted key order wins: Worker).
func TestTemplateOfTwoTemplatesDeterministic(t *testing.T) {
	tmpl := func(topo string) map[string]any {
		return map[string]any{"template": map[string]any{"metadata": map[string]any{
			"annotations": map[string]any{phalanxv1alpha1.TopologyRequiredAnnotation: topo},
		}}}
	}
	job := map[string]any{"spec": map[string]any{"pytorchReplicaSpecs": map[string]any{
		"Master": tmpl("master-block"), "Worker": tmpl("worker-block"),
	}}}
	want := &Template{
		Labels:      map[string]string{},
		Annotations: map[string]string{phalanxv1alpha1.TopologyRequiredAnnotation: "worker-block"},
	}
	for i := 0; i < 50; i++ {
		if got := TemplateOf(job); !reflect.DeepEqual(got, want) {
			t.Fatalf("call %d: TemplateOf = %+v, want %+v", i, got, want)
		}
	}
}

func quantityBytes(t *testing.T, s string) []byte {
	q := resource.MustParse(s)
	raw, err := q.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestMemberPods(t *testing.T) {
	sel := &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{MatchExpressions: []v1.NodeSelectorRequirement{
		{Key: "pool", Operator: v1.NodeSelectorOpIn, Values: []string{"gpu"}}}}}}
	affinity, err := sel.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	tol := v1.Toleration{Key: "gpu", Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}
	tolBytes, err := tol.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	comps := []*karmadapb.Component{
		{Name: "Master", Replicas: 1, ReplicaRequirements: &karmadapb.ComponentReplicaRequirements{
			ResourceRequestBytes: map[string][]byte{"cpu": quantityBytes(t, "2")}, PriorityClassName: "high"}},
		{Name: "Worker", Replicas: 2, ReplicaRequirements: &karmadapb.ComponentReplicaRequirements{
			ResourceRequestBytes: map[string][]byte{"nvidia.com/gpu": quantityBytes(t, "8")},
			NodeClaim:            &karmadapb.NodeClaim{NodeSelector: map[string]string{"zone": "z1"}, NodeAffinityBytes: affinity, TolerationsBytes: [][]byte{tolBytes}}}},
	}
	tmpl := &Template{Annotations: map[string]string{phalanxv1alpha1.TopologyRequiredAnnotation: "leaf"}}
	pods, err := MemberPods("team-a", comps, tmpl)
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 3 {
		t.Fatalf("%d pods, want 3", len(pods))
	}
	m, w := pods[0], pods[2]
	if m.Namespace != "team-a" || m.Spec.PriorityClassName != "high" || !m.Spec.Containers[0].Resources.Requests.Cpu().Equal(resource.MustParse("2")) {
		t.Errorf("master: %+v", m)
	}
	gpus := w.Spec.Containers[0].Resources.Requests["nvidia.com/gpu"]
	if gpus.Value() != 8 || w.Spec.NodeSelector["zone"] != "z1" || !reflect.DeepEqual(w.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution, sel) ||
		!reflect.DeepEqual(w.Spec.Tolerations, []v1.Toleration{tol}) || w.Annotations[phalanxv1alpha1.TopologyRequiredAnnotation] != "leaf" {
		t.Errorf("worker: %+v", w)
	}
	if pods[1].Name == w.Name {
		t.Errorf("two members named %s", w.Name)
	}

	for _, tc := range []struct {
		name string
		rr   *karmadapb.ComponentReplicaRequirements
		want string
	}{
		{name: "bad quantity", rr: &karmadapb.ComponentReplicaRequirements{ResourceRequestBytes: map[string][]byte{"cpu": {0xff}}},
			want: "components[0] (x): resourceRequestBytes[cpu]"},
		{name: "negative quantity", rr: &karmadapb.ComponentReplicaRequirements{ResourceRequestBytes: map[string][]byte{"cpu": quantityBytes(t, "-1")}},
			want: "resourceRequestBytes[cpu]: -1 is negative"},
		{name: "bad affinity", rr: &karmadapb.ComponentReplicaRequirements{NodeClaim: &karmadapb.NodeClaim{NodeAffinityBytes: []byte{0xff}}},
			want: "nodeClaim.nodeAffinityBytes"},
		{name: "bad toleration", rr: &karmadapb.ComponentReplicaRequirements{NodeClaim: &karmadapb.NodeClaim{TolerationsBytes: [][]byte{{0xff}}}},
			want: "nodeClaim.tolerationsBytes[0]"},
	} {
		_, err := MemberPods("ns", []*karmadapb.Component{{Name: "x", Replicas: 1, ReplicaRequirements: tc.rr}}, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", tc.name, err, tc.want)
		}
	}
}

func TestCredentialsErrorsNameTheFlag(t *testing.T) {
	f := Field{Cert: "--cert", Key: "--key", ClientCA: "--ca"}
	for _, tc := range []struct {
		files TLSFiles
		want  string
	}{
		{files: TLSFiles{CertFile: "c"}, want: "--cert and --key: give both or neither"},
		{files: TLSFiles{ClientCAFile: "ca"}, want: "--ca: a client CA needs a serving certificate"},
		{files: TLSFiles{CertFile: "/nonexistent/c", KeyFile: "/nonexistent/k"}, want: "--cert, --key:"},
	} {
		if _, err := tc.files.Credentials(f); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.files, err, tc.want)
		}
	}
	if opt, err := (TLSFiles{}).Credentials(f); err != nil || opt != nil {
		t.Errorf("no files: %v %v, want plaintext", opt, err)
	}
}

type onePlanner struct{}

func (onePlanner) Copies(context.Context, Question) (gang.Answer, error) {
	return gang.Answer{Copies: 1}, nil
}

// Without a Karmada kubeconfig every call is answered without the
// workload's template, and counted as such (docs/multicluster.md says so).
func TestCallsWithoutTemplatesAreCounted(t *testing.T) {
	registerMetrics()
	s := &Server{Planner: onePlanner{}}
	before, err := testutil.GetCounterMetricValue(templateMisses)
	if err != nil {
		t.Fatal(err)
	}
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("object", "kind=Job, name=team-a/train"))
	req := &karmadapb.MaxAvailableComponentSetsRequest{Namespace: "team-a", Components: []*karmadapb.Component{{Name: "w", Replicas: 2,
		ReplicaRequirements: &karmadapb.ComponentReplicaRequirements{}}}}
	for range 2 {
		if _, err := s.MaxAvailableComponentSets(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	after, err := testutil.GetCounterMetricValue(templateMisses)
	if err != nil {
		t.Fatal(err)
	}
	if after-before != 2 {
		t.Fatalf("phalanx_estimator_template_misses_total grew by %v over 2 calls without templates, want 2", after-before)
	}
}

// A rotated key pair is served from the next handshake on, without a
// restart; a half-written rotation keeps the previous pair.
func TestKeyPairReloaded(t *testing.T) {
	dir := t.TempDir()
	a, err := estimatortest.WriteTLS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b, err := estimatortest.WriteTLS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	stamp := time.Now()
	install := func(cert, key string) {
		t.Helper()
		stamp = stamp.Add(time.Minute)
		for src, dst := range map[string]string{cert: certFile, key: keyFile} {
			raw, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dst, raw, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(dst, stamp, stamp); err != nil {
				t.Fatal(err)
			}
		}
	}
	leaf := func(certPEM string) []byte {
		t.Helper()
		raw, err := os.ReadFile(certPEM)
		if err != nil {
			t.Fatal(err)
		}
		block, _ := pem.Decode(raw)
		return block.Bytes
	}
	served := func(cfg *tls.Config) []byte {
		t.Helper()
		c, err := cfg.GetCertificate(nil)
		if err != nil || c == nil {
			t.Fatalf("GetCertificate: %v", err)
		}
		return c.Certificate[0]
	}

	install(a.ServerCert, a.ServerKey)
	cfg, err := TLSFiles{CertFile: certFile, KeyFile: keyFile}.Config(Field{Cert: "--cert", Key: "--key"})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(served(cfg), leaf(a.ServerCert)) {
		t.Fatal("not serving the installed certificate")
	}
	install(b.ServerCert, b.ServerKey)
	if !bytes.Equal(served(cfg), leaf(b.ServerCert)) {
		t.Fatal("the rotated certificate is not served")
	}
	install(a.ServerCert, b.ServerKey) // the certificate written, not its key yet
	if !bytes.Equal(served(cfg), leaf(b.ServerCert)) {
		t.Fatal("a mismatched pair replaced the previous one")
	}
	install(a.ServerCert, a.ServerKey)
	if !bytes.Equal(served(cfg), leaf(a.ServerCert)) {
		t.Fatal("the completed rotation is not served")
	}
}
