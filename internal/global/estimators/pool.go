package estimators

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/intstr"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"

	"github.com/phalanx-sched/phalanx/internal/estimator/karmadapb"
)

// maxInFlight bounds SetsAll's concurrent calls.
const maxInFlight = 16

// Services reads the estimator Services of the Karmada control plane; an
// absent Service is a NotFound error.
type Services interface {
	Service(namespace, name string) (*v1.Service, error)
}

// FromLister reads Services from an informer's lister.
func FromLister(l corelisters.ServiceLister) Services { return listerServices{l} }

type listerServices struct{ l corelisters.ServiceLister }

func (s listerServices) Service(namespace, name string) (*v1.Service, error) {
	return s.l.Services(namespace).Get(name)
}

// Question is one job: its workload (for the metadata key "object") and the
// components of one set.
type Question struct {
	Namespace, Kind, Name string
	Components            []*karmadapb.Component
	// Assumed are workloads already sent to the cluster whose pods its
	// planner may not see yet; the estimator deducts them.
	Assumed []*karmadapb.AssumedWorkload
}

// Result is one cluster's answer to SetsAll.
type Result struct {
	Sets int32
	Err  error
}

// Pool holds one connection per member cluster's estimator.
type Pool struct {
	cfg      Config
	services Services
	creds    credentials.TransportCredentials

	mu     sync.Mutex
	conns  map[string]*conn
	closed bool
}

type conn struct {
	addr   string
	cc     *grpc.ClientConn
	client karmadapb.EstimatorClient
}

// New validates cfg and reads its TLS files.
func New(cfg Config, services Services) (*Pool, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	creds, err := cfg.credentials()
	if err != nil {
		return nil, err
	}
	return &Pool{cfg: cfg, services: services, creds: creds, conns: map[string]*conn{}}, nil
}

// Sets asks cluster's estimator how many whole sets of q fit there now,
// within the configured timeout. The answer is the estimator's, unchecked
// (Karmada's own estimator answers -1 for "no opinion").
func (p *Pool) Sets(ctx context.Context, cluster string, q Question) (int32, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	return p.ask(ctx, cluster, q)
}

// SetsAll asks every cluster at once under one deadline (the configured
// timeout). Each cluster's failure is its own Result.Err.
func (p *Pool) SetsAll(ctx context.Context, clusters []string, q Question) map[string]Result {
	each := make(map[string]Question, len(clusters))
	for _, cluster := range clusters {
		each[cluster] = q
	}
	return p.SetsEach(ctx, each)
}

// SetsEach is SetsAll with a question of its own for each cluster (e.g.
// each with the workloads assumed there).
func (p *Pool) SetsEach(ctx context.Context, questions map[string]Question) map[string]Result {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	results := make(map[string]Result, len(questions))
	var mu sync.Mutex
	var wg sync.WaitGroup
	slots := make(chan struct{}, maxInFlight)
	for cluster, q := range questions {
		wg.Go(func() {
			r := p.askInSlot(ctx, slots, cluster, q)
			mu.Lock()
			results[cluster] = r
			mu.Unlock()
		})
	}
	wg.Wait()
	return results
}

// askInSlot asks once a slot is free, unless the deadline passes first (a
// slot freed at the deadline is no licence to start).
func (p *Pool) askInSlot(ctx context.Context, slots chan struct{}, cluster string, q Question) Result {
	select {
	case slots <- struct{}{}:
		defer func() { <-slots }()
		if ctx.Err() == nil {
			var r Result
			r.Sets, r.Err = p.ask(ctx, cluster, q)
			return r
		}
	case <-ctx.Done():
	}
	return Result{Err: fmt.Errorf("cluster %s: not asked: %w", cluster, ctx.Err())}
}

func (p *Pool) ask(ctx context.Context, cluster string, q Question) (int32, error) {
	c, err := p.conn(ctx, cluster)
	if err != nil {
		return 0, err
	}
	// As karmada-scheduler names the workload (pkg/scheduler/core/util.go).
	ctx = metadata.AppendToOutgoingContext(ctx, "object", fmt.Sprintf("kind=%s, name=%s/%s", q.Kind, q.Namespace, q.Name))
	resp, err := c.client.MaxAvailableComponentSets(ctx, &karmadapb.MaxAvailableComponentSetsRequest{
		Cluster: cluster, Namespace: q.Namespace, Components: q.Components, AssumedWorkloads: q.Assumed,
	})
	if err != nil {
		return 0, fmt.Errorf("cluster %s: estimator %s: MaxAvailableComponentSets: %w", cluster, c.addr, err)
	}
	return resp.GetMaxSets(), nil
}

// conn returns cluster's cached connection, dialling anew when there is
// none or the Service now points elsewhere.
func (p *Pool) conn(ctx context.Context, cluster string) (*conn, error) {
	addr, err := p.address(cluster)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", cluster, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, fmt.Errorf("cluster %s: estimator pool closed", cluster)
	}
	old := p.conns[cluster]
	if old != nil && old.addr == addr {
		return old, nil
	}
	// Lazy: the call's deadline bounds connecting too.
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(p.creds))
	if err != nil {
		return nil, fmt.Errorf("cluster %s: estimator %s: %w", cluster, addr, err)
	}
	if old != nil {
		// A call still on the old connection fails; the next one asks anew.
		_ = old.cc.Close()
	}
	klog.FromContext(ctx).V(2).Info("Estimator connection", "cluster", cluster, "address", addr, "previous", prevAddr(old))
	c := &conn{addr: addr, cc: cc, client: karmadapb.NewEstimatorClient(cc)}
	p.conns[cluster] = c
	return c, nil
}

func prevAddr(c *conn) string {
	if c == nil {
		return ""
	}
	return c.addr
}

// address resolves cluster's estimator as karmada-scheduler does
// (pkg/estimator/client/service.go): the ExternalName Service's target, or
// the cluster DNS name of the Service when it is absent. Karmada also tries
// <name>.<ns>.svc after that; one address is kept here.
func (p *Pool) address(cluster string) (string, error) {
	name := p.cfg.Prefix + "-" + cluster
	svc, err := p.services.Service(p.cfg.Namespace, name)
	if apierrors.IsNotFound(err) {
		return net.JoinHostPort(fmt.Sprintf("%s.%s.svc.cluster.local", name, p.cfg.Namespace), strconv.Itoa(int(p.cfg.Port))), nil
	}
	if err == nil && svc == nil {
		err = errors.New("no Service and no NotFound error")
	}
	if err != nil {
		return "", fmt.Errorf("estimator Service %s/%s: %w", p.cfg.Namespace, name, err)
	}
	if svc.Spec.Type != v1.ServiceTypeExternalName {
		return "", fmt.Errorf("estimator Service %s/%s: type %q, want ExternalName", p.cfg.Namespace, name, svc.Spec.Type)
	}
	for _, sp := range svc.Spec.Ports {
		if sp.Port != p.cfg.Port {
			continue
		}
		if sp.TargetPort.Type != intstr.Int || sp.TargetPort.IntVal < 1 {
			return "", fmt.Errorf("estimator Service %s/%s: port %d: targetPort %q is not a port number", p.cfg.Namespace, name, sp.Port, sp.TargetPort.String())
		}
		return net.JoinHostPort(svc.Spec.ExternalName, strconv.Itoa(int(sp.TargetPort.IntVal))), nil
	}
	return "", fmt.Errorf("estimator Service %s/%s: no port %d (%s)", p.cfg.Namespace, name, p.cfg.Port, FlagPort)
}

// Forget closes cluster's connection (the cluster left).
func (p *Pool) Forget(cluster string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.conns[cluster]; c != nil {
		_ = c.cc.Close()
		delete(p.conns, cluster)
	}
}

// Close closes every connection; later calls fail.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for cluster, c := range p.conns {
		_ = c.cc.Close()
		delete(p.conns, cluster)
	}
	p.closed = true
}
