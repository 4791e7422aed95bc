// Package cli is kubectl-phalanx, the kubectl plugin: where a user's jobs
// stand (queues, jobs and their positions, why one waits, free GPUs per
// topology domain). It reads with the user's own kubeconfig and RBAC, and
// only reads.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	pgclientset "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"
	"sigs.k8s.io/yaml"

	clglobal "github.com/phalanx-sched/phalanx/internal/cli/global"
	phalanxclientset "github.com/phalanx-sched/phalanx/pkg/generated/clientset/versioned"
)

const usage = `kubectl phalanx: where your jobs stand in phalanx's queues.

Commands:
  queues            the queue tree: weight, guarantee, capability, deserved share,
                    allocated, pending and running gangs (cluster read access)
  jobs              gangs of a namespace (-n) or all (-A): source, members bound /
                    minimum, state and reason, time waiting, position in its queue
  why <target>      why a gang waits, from a pod, an owner or the gang:
                    pod/NAME, job/NAME (any owner kind: jobset/NAME, pytorchjob/NAME ...),
                    podgroup/NAME, or NAME (a PodGroup, else a pod)
  top               free GPUs per topology domain (leaf, spine, NVLink clique ...)

On a Karmada control plane (it serves work.karmada.io resourcebindings), jobs
and why show phalanx-global's ResourceBindings instead of gangs: global queue,
position, member, state and why; why takes a binding's or its template's name.

Flags:
  -n, --namespace   namespace (default: the kubeconfig context's)
  -A, --all-namespaces
  -q, --queue       jobs: only gangs of this queue
  -o, --output      table (default), json or yaml
      --resource    top: the resource to count (default nvidia.com/gpu)
      --scheduler-name  Karmada plane: the schedulerName of phalanx-global's bindings
                    (default phalanx-global)
      --kubeconfig, --context
`

// Options are the parsed flags.
type Options struct {
	Namespace     string
	AllNamespaces bool
	Queue         string
	Output        string
	Resource      string
	SchedulerName string
	Kubeconfig    string
	Context       string
}

// clients are what the commands read with.
type clients struct {
	kube      kubernetes.Interface
	phalanx   phalanxclientset.Interface
	podGroups pgclientset.Interface
	config    *rest.Config
	namespace string
}

// Run is the plugin: it returns the exit code.
func Run(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("kubectl-phalanx", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o := Options{}
	fs.StringVarP(&o.Namespace, "namespace", "n", "", "")
	fs.BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "")
	fs.StringVarP(&o.Queue, "queue", "q", "", "")
	fs.StringVarP(&o.Output, "output", "o", "table", "")
	fs.StringVar(&o.Resource, "resource", "nvidia.com/gpu", "")
	fs.StringVar(&o.SchedulerName, "scheduler-name", "phalanx-global", "")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "")
	fs.StringVar(&o.Context, "context", "", "")
	help := fs.BoolP("help", "h", false, "")
	if err := fs.Parse(args); err != nil {
		fmt.Fprintf(stderr, "error: %v\n\n%s", err, usage)
		return 2
	}
	rest := fs.Args()
	if *help || len(rest) == 0 {
		fmt.Fprint(stdout, usage)
		if *help {
			return 0
		}
		return 2
	}
	switch o.Output {
	case "table", "json", "yaml":
	default:
		fmt.Fprintf(stderr, "error: --output %q: use table, json or yaml\n", o.Output)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := connect(o)
	if err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return 1
	}
	var out any
	switch cmd := rest[0]; cmd {
	case "jobs", "gangs", "why":
		if cmd == "why" && len(rest) != 2 {
			fmt.Fprintf(stderr, "error: why needs one target: pod/NAME, job/NAME, podgroup/NAME or NAME\n")
			return 2
		}
		out, err = jobsOrWhy(ctx, c, o, rest)
	case "queues":
		out, err = queues(ctx, c)
	case "top", "nodes":
		out, err = top(ctx, c, o.Resource)
	default:
		fmt.Fprintf(stderr, "error: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "error: %v\n", explain(err))
		return 1
	}
	if err := print(stdout, o.Output, out); err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return 1
	}
	return 0
}

// jobsOrWhy runs jobs or why: on the gangs of a cluster, or on a Karmada
// plane on phalanx-global's bindings (which stand for the members' gangs
// there: a plane runs no pods).
func jobsOrWhy(ctx context.Context, c *clients, o Options, args []string) (any, error) {
	onPlane, err := clglobal.OnPlane(c.config)
	if err != nil {
		return nil, err
	}
	switch {
	case !onPlane && args[0] == "why":
		return why(ctx, c, args[1])
	case !onPlane:
		return jobs(ctx, c, o)
	}
	dyn, err := dynamic.NewForConfig(c.config)
	if err != nil {
		return nil, err
	}
	if args[0] == "why" {
		return clglobal.Explain(ctx, clglobal.Clients{Dynamic: dyn, Kube: c.kube}, c.namespace, args[1], o.SchedulerName, explain)
	}
	return clglobal.Jobs(ctx, dyn, c.namespace, o.Queue, o.SchedulerName, explain)
}

func connect(o Options) (*clients, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.Kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.Context})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("reading the kubeconfig: %w", err)
	}
	ns := o.Namespace
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil || ns == "" {
			ns = "default"
		}
	}
	if o.AllNamespaces {
		ns = ""
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 50, 100
	c := &clients{namespace: ns, config: cfg}
	if c.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if c.phalanx, err = phalanxclientset.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if c.podGroups, err = pgclientset.NewForConfig(cfg); err != nil {
		return nil, err
	}
	return c, nil
}

// explain turns API errors into what the user can act on: which
// permission is missing, which API is not served.
func explain(err error) error {
	var status apierrors.APIStatus
	switch {
	case apierrors.IsForbidden(err):
		if errors.As(err, &status) {
			d := status.Status().Details
			what := "that"
			if d != nil {
				what = d.Kind
				if d.Group != "" {
					what += "." + d.Group
				}
			}
			return fmt.Errorf("permission denied: you may not read %s here (%s). "+
				"A namespace's view role reads its jobs and positions; cluster views need the ClusterRole phalanx-cluster-viewer", what, status.Status().Message)
		}
	case meta.IsNoMatchError(err), apierrors.IsNotFound(err) && isNoResource(err):
		return fmt.Errorf("the API server does not serve %v: are phalanx's CRDs installed (kubectl apply -f manifests/crds)?", err)
	}
	return err
}

func isNoResource(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	return d != nil && d.Name == "" && strings.Contains(status.Status().Message, "the server could not find the requested resource")
}

// print writes v as a table (its table method) or as JSON/YAML.
func print(w io.Writer, format string, v any) error {
	switch format {
	case "json":
		raw, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", raw)
		return err
	case "yaml":
		raw, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(raw)
		return err
	}
	switch t := v.(type) {
	case interface{ table(io.Writer) error }:
		return t.table(w)
	case interface{ Table(io.Writer) error }:
		return t.Table(w)
	}
	return fmt.Errorf("no table for %T", v)
}
