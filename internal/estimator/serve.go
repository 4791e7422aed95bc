package estimator

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime/debug"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
)

// DefaultPort is the port karmada-scheduler dials (--scheduler-estimator-port).
const DefaultPort = 10352

// TLSFiles are the server's certificate and key, and the CA of the client
// certificates it requires (karmada-scheduler's
// --scheduler-estimator-{cert,key}-file). All empty: plaintext, as Karmada's
// own estimator serves by default.
type TLSFiles struct {
	CertFile, KeyFile, ClientCAFile string
}

// Field names the files' flags, for errors.
type Field struct {
	Cert, Key, ClientCA string
}

// Credentials loads the TLS files; errors name the flag at fault.
func (f TLSFiles) Credentials(field Field) (grpc.ServerOption, error) {
	if f.CertFile == "" && f.KeyFile == "" {
		if f.ClientCAFile != "" {
			return nil, fmt.Errorf("%s: a client CA needs a serving certificate (%s and %s)", field.ClientCA, field.Cert, field.Key)
		}
		return nil, nil
	}
	if f.CertFile == "" || f.KeyFile == "" {
		return nil, fmt.Errorf("%s and %s: give both or neither", field.Cert, field.Key)
	}
	cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("%s, %s: %w", field.Cert, field.Key, err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if f.ClientCAFile != "" {
		raw, err := os.ReadFile(f.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", field.ClientCA, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(raw) {
			return nil, fmt.Errorf("%s: %s holds no PEM certificate", field.ClientCA, f.ClientCAFile)
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return grpc.Creds(credentials.NewTLS(cfg)), nil
}

func recoverPanics(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	defer func() {
		if r := recover(); r != nil {
			klog.FromContext(ctx).Error(nil, "Panic answering a Karmada estimator call", "method", info.FullMethod, "panic", r, "stack", string(debug.Stack()))
			err = status.Errorf(codes.Internal, "the estimator failed answering %s: %v", info.FullMethod, r)
		}
	}()
	return handler(ctx, req)
}

// Serve answers on lis until ctx ends. The standard gRPC health service
// reports SERVING.
func (s *Server) Serve(ctx context.Context, lis net.Listener, opts ...grpc.ServerOption) error {
	// A panic answers the call with Internal instead of taking the
	// scheduler down with it.
	g := grpc.NewServer(append(opts, grpc.ChainUnaryInterceptor(recoverPanics))...)
	s.Register(g)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(g, hs)
	go func() {
		<-ctx.Done()
		hs.Shutdown()
		g.GracefulStop()
	}()
	logger := klog.FromContext(ctx)
	logger.Info("Serving Karmada's scheduler-estimator", "address", lis.Addr().String(), "cluster", s.Cluster)
	if s.Templates == nil {
		logger.Info("Warning: no --karmada-kubeconfig: answers ignore the workloads' queue labels, topology and sub-group annotations; each call counts in phalanx_estimator_template_misses_total")
	}
	if err := g.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return nil
}
