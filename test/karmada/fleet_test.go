package karmada

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	workv1alpha1 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"github.com/karmada-io/karmada/pkg/util/names"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/phalanx-sched/phalanx/internal/estimator/estimatortest"
	"github.com/phalanx-sched/phalanx/internal/testcluster"
)

// fleetControllers are the karmada-controller-manager controllers a fleet
// runs (--controllers; the resource detector always runs): cluster (Cluster
// finalizer, execution namespace, not-ready taints, and with gate Failover
// its taint manager, which evicts bindings from NoExecute-tainted members),
// clusterStatus, binding (binding -> Work), execution (Work -> member),
// workStatus (member -> Work status), bindingStatus (Works -> the binding's
// aggregatedStatus), and for failover clustertaintpolicy (NoExecute taints
// by manifests/global/failover.yaml) and gracefulEviction (the evicted
// copy's removal once the job is healthy elsewhere).
var fleetControllers = []string{"cluster", "clusterStatus", "binding", "execution", "workStatus", "bindingStatus", "clustertaintpolicy", "gracefulEviction"}

// clusterFailureThreshold is how long a member fails its health checks
// before Karmada marks it not Ready (30 s by default).
const clusterFailureThreshold = "10s"

// clusterSecrets is where the plane keeps the members' credentials, and
// the member namespace of the ServiceAccount they belong to (karmadactl
// join's choice).
const clusterSecrets = "karmada-cluster"

// fleet is a Karmada plane running the real propagation flow:
// karmada-controller-manager and karmada-scheduler (accurate estimator:
// phalanx-scheduler's) over members registered as Push Clusters with
// credentials, each running the Job controller and phalanx-scheduler.
type fleet struct {
	*plane
	members           map[string]*member
	controllerManager *proc
}

// startFleet starts the plane (its own logs and estimator TLS), one member
// per entry of nodes (member name -> its nodes), joins them and starts karmada-controller-manager and
// karmada-scheduler; it returns once every Cluster is Ready with the
// status the cluster status controller collected.
func startFleet(t *testing.T, nodes map[string][]testcluster.NodeSpec) *fleet {
	t.Helper()
	ctx := context.Background()
	l := &logs{}
	tls, err := estimatortest.WriteTLS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p := startPlane(t, l, tls)
	f := &fleet{plane: p, members: map[string]*member{}}
	if err := p.InstallCRDYAML(ctx, karmadaCRDs(t, "apps", "autoscaling", "config", "multicluster", "networking", "remedy")...); err != nil {
		t.Fatalf("installing Karmada's other CRDs: %v", err)
	}
	if _, err := p.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: clusterSecrets}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p.installPermanentIDs(t)
	for _, name := range sortedKeys(nodes) {
		m := startMemberScheduler(t, p, name, nodes[name])
		if err := m.StartJobController(); err != nil {
			t.Fatalf("Job controller of %s: %v", name, err)
		}
		f.members[name] = m
	}
	t.Cleanup(func() { l.dump(t) })
	for _, name := range sortedKeys(f.members) {
		m := f.members[name]
		m.waitEstimators(t, tls)
		p.join(t, m)
		if err := p.pointEstimator(ctx, name, m.phalanxPort); err != nil {
			t.Fatal(err)
		}
	}
	f.controllerManager = startProc(t, l, p.dir, "karmada-controller-manager", karmadaCmd("controller-manager"),
		"--kubeconfig="+p.Kubeconfig,
		"--controllers="+strings.Join(fleetControllers, ","),
		"--cluster-status-update-frequency=2s",
		"--leader-elect=false",
		"--metrics-bind-address=0",
		"--health-probe-bind-address=0",
		"--cluster-failure-threshold="+clusterFailureThreshold,
		// Failover as manifests/global/failover.yaml asks for it.
		"--feature-gates=MultiplePodTemplatesScheduling=true,Failover=true",
		"--enable-no-execute-taint-eviction=true",
		"--v=4")
	for _, name := range sortedKeys(f.members) {
		f.waitClusterReady(t, name)
	}
	p.startScheduler(t)
	return f
}

// join does what `karmadactl join` does for a Push member: in the member,
// a ServiceAccount bound to cluster-admin and a token for it (TokenRequest);
// in the plane, a Secret with the token and the member's serving CA, and
// the Cluster pointing at both. The credentials are first tried as Karmada
// will use them.
func (p *plane) join(t *testing.T, m *member) {
	t.Helper()
	ctx := context.Background()
	const sa = "karmada-controller-manager"
	if _, err := m.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: clusterSecrets}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Client.CoreV1().ServiceAccounts(clusterSecrets).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "karmada-" + m.name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: clusterSecrets, Name: sa}},
	}
	if _, err := m.Client.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := m.Client.CoreV1().ServiceAccounts(clusterSecrets).CreateToken(ctx, sa,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(24 * 3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for %s/%s in %s: %v", clusterSecrets, sa, m.name, err)
	}
	token := tr.Status.Token
	// Karmada's client config carries a CA and no TLS server name (unlike
	// m.Config, whose CA is the loopback one): trust the serving chain.
	caFile := m.APIServer.ServerOpts.SecureServing.ServerCert.CertKey.CertFile
	ca, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatalf("serving certificate of %s: %v", m.name, err)
	}
	as := kubernetes.NewForConfigOrDie(&rest.Config{Host: m.Config.Host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: ca}})
	if _, err := as.BatchV1().Jobs(namespace).List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("%s with the ServiceAccount token and CA %s: %v", m.name, caFile, err)
	}

	secret := &v1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: m.name, Namespace: clusterSecrets},
		Data:       map[string][]byte{clusterv1alpha1.SecretTokenKey: []byte(token), clusterv1alpha1.SecretCADataKey: ca},
	}
	if _, err := p.Client.CoreV1().Secrets(clusterSecrets).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cl := &clusterv1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: m.name},
		Spec: clusterv1alpha1.ClusterSpec{SyncMode: clusterv1alpha1.Push, APIEndpoint: m.Config.Host,
			SecretRef: &clusterv1alpha1.LocalSecretReference{Namespace: clusterSecrets, Name: secret.Name}},
	}
	if _, err := p.karmada.ClusterV1alpha1().Clusters().Create(ctx, cl, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating Cluster %s: %v", m.name, err)
	}
}

// waitClusterReady waits until the cluster status controller reports the
// member Ready with its Jobs API and nodes, and the cluster controller has
// made its execution namespace and lifted the not-ready taint.
func (f *fleet) waitClusterReady(t *testing.T, name string) {
	t.Helper()
	var last string
	err := testcluster.Eventually(context.Background(), 90*time.Second, func(ctx context.Context) (bool, error) {
		if f.controllerManager.exited() {
			t.Fatalf("%s exited:\n%s", f.controllerManager, tail(f.controllerManager.log, 40))
		}
		cl, err := f.karmada.ClusterV1alpha1().Clusters().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ready := meta.FindStatusCondition(cl.Status.Conditions, clusterv1alpha1.ClusterConditionReady)
		last = fmt.Sprintf("ready %+v, taints %v, %d API groups, summary %v", ready, cl.Spec.Taints, len(cl.Status.APIEnablements), cl.Status.ResourceSummary)
		if ready == nil || ready.Status != metav1.ConditionTrue || len(cl.Spec.Taints) != 0 || !servesJobs(cl) ||
			cl.Status.ResourceSummary == nil || cl.Status.ResourceSummary.Allocatable.Cpu().IsZero() {
			return false, nil
		}
		_, err = f.Client.CoreV1().Namespaces().Get(ctx, names.GenerateExecutionSpaceName(name), metav1.GetOptions{})
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("Cluster %s never ready by karmada-controller-manager (last: %s): %v", name, last, err)
	}
}

func servesJobs(cl *clusterv1alpha1.Cluster) bool {
	for _, e := range cl.Status.APIEnablements {
		if e.GroupVersion != "batch/v1" {
			continue
		}
		for _, r := range e.Resources {
			if r.Name == "jobs" {
				return true
			}
		}
	}
	return false
}

// permanentIDs are the labels karmada-webhook (not run) puts on the objects
// Karmada's controllers create; the binding and binding status controllers
// find a binding's Works by it. karmada-webhook writes a fresh UUID; an
// admission policy has no source of one (CEL's request has no uid), so the
// value here is <namespace>.<name>: unique among live objects, reused by a
// re-creation, and rejected (label too long) for names past 63 characters
// in all. Unlike karmada-webhook, the Work's label is not copied into its
// manifests (nothing this harness runs reads it there).
var permanentIDs = map[string]string{
	"resourcebindings": workv1alpha2.ResourceBindingPermanentIDLabel,
	"works":            workv1alpha2.WorkPermanentIDLabel,
}

// installPermanentIDs stands in for karmada-webhook's mutations of
// ResourceBindings and Works with MutatingAdmissionPolicies, and waits
// until the plane applies them (dry-run creations come back labelled).
func (p *plane) installPermanentIDs(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for _, resource := range sortedKeys(permanentIDs) {
		label := permanentIDs[resource]
		name := "karmada-permanent-id-" + resource
		policy := &admissionv1.MutatingAdmissionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: admissionv1.MutatingAdmissionPolicySpec{
				MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionv1.RuleWithOperations{
						Operations: []admissionv1.OperationType{admissionv1.Create},
						Rule:       admissionv1.Rule{APIGroups: []string{"work.karmada.io"}, APIVersions: []string{"*"}, Resources: []string{resource}},
					},
				}}},
				MatchConditions: []admissionv1.MatchCondition{{Name: "unlabelled",
					Expression: fmt.Sprintf(`!has(object.metadata.labels) || !(%q in object.metadata.labels)`, label)}},
				Mutations: []admissionv1.Mutation{{PatchType: admissionv1.PatchTypeApplyConfiguration,
					ApplyConfiguration: &admissionv1.ApplyConfiguration{
						Expression: fmt.Sprintf(`Object{metadata: Object.metadata{labels: {%q: request.namespace + "." + request.name}}}`, label)}}},
				FailurePolicy:      ptr.To(admissionv1.Fail),
				ReinvocationPolicy: admissionv1.NeverReinvocationPolicy,
			},
		}
		if _, err := p.Client.AdmissionregistrationV1().MutatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{}); err != nil {
			t.Fatalf("MutatingAdmissionPolicy %s: %v", name, err)
		}
		binding := &admissionv1.MutatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       admissionv1.MutatingAdmissionPolicyBindingSpec{PolicyName: name},
		}
		if _, err := p.Client.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			t.Fatalf("MutatingAdmissionPolicyBinding %s: %v", name, err)
		}
	}
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	probe := metav1.ObjectMeta{Name: "permanent-id-probe", Namespace: karmadaSystem}
	var labels []map[string]string
	err := testcluster.Eventually(ctx, 30*time.Second, func(ctx context.Context) (bool, error) {
		rb, err := p.karmada.WorkV1alpha2().ResourceBindings(karmadaSystem).Create(ctx, &workv1alpha2.ResourceBinding{ObjectMeta: probe,
			Spec: workv1alpha2.ResourceBindingSpec{Resource: workv1alpha2.ObjectReference{APIVersion: "v1", Kind: "ConfigMap", Name: "probe"}}}, dry)
		if err != nil {
			return false, err
		}
		work, err := p.karmada.WorkV1alpha1().Works(karmadaSystem).Create(ctx, &workv1alpha1.Work{ObjectMeta: probe}, dry)
		if err != nil {
			return false, err
		}
		labels = []map[string]string{rb.Labels, work.Labels}
		return rb.Labels[permanentIDs["resourcebindings"]] != "" && work.Labels[permanentIDs["works"]] != "", nil
	})
	if err != nil {
		t.Fatalf("the plane never applied the permanent-id MutatingAdmissionPolicies (last labels %v): %v", labels, err)
	}
}
