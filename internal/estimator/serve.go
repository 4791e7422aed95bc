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
	"sync"
	"time"

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
	cfg, err := f.Config(field)
	if cfg == nil || err != nil {
		return nil, err
	}
	return grpc.Creds(credentials.NewTLS(cfg)), nil
}

// Config is the server's TLS configuration (nil for plaintext). The key
// pair is read again when its files change (a rotated Secret), so rotation
// needs no restart; a pair that does not load (the certificate written
// before its key) leaves the previous one in use until it does.
func (f TLSFiles) Config(field Field) (*tls.Config, error) {
	if f.CertFile == "" && f.KeyFile == "" {
		if f.ClientCAFile != "" {
			return nil, fmt.Errorf("%s: a client CA needs a serving certificate (%s and %s)", field.ClientCA, field.Cert, field.Key)
		}
		return nil, nil
	}
	if f.CertFile == "" || f.KeyFile == "" {
		return nil, fmt.Errorf("%s and %s: give both or neither", field.Cert, field.Key)
	}
	pair := &keyPair{certFile: f.CertFile, keyFile: f.KeyFile}
	if err := pair.load(); err != nil {
		return nil, fmt.Errorf("%s, %s: %w", field.Cert, field.Key, err)
	}
	cfg := &tls.Config{GetCertificate: pair.get, MinVersion: tls.VersionTLS12}
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
	return cfg, nil
}

// keyPair is the serving certificate, reloaded when its files' modification
// times change.
type keyPair struct {
	certFile, keyFile string

	mu              sync.Mutex
	cert            *tls.Certificate
	certMod, keyMod time.Time
}

func (k *keyPair) load() error {
	certMod, keyMod := modTime(k.certFile), modTime(k.keyFile)
	cert, err := tls.LoadX509KeyPair(k.certFile, k.keyFile)
	if err != nil {
		return err
	}
	k.cert, k.certMod, k.keyMod = &cert, certMod, keyMod
	return nil
}

func (k *keyPair) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if modTime(k.certFile).Equal(k.certMod) && modTime(k.keyFile).Equal(k.keyMod) {
		return k.cert, nil
	}
	if err := k.load(); err != nil {
		klog.Background().Error(err, "Cannot reload the estimator's key pair; serving the previous one", "cert", k.certFile, "key", k.keyFile)
		return k.cert, nil
	}
	klog.Background().Info("Reloaded the estimator's key pair", "cert", k.certFile)
	return k.cert, nil
}

// modTime is a file's modification time (zero when it cannot be read);
// Stat follows a Secret volume's symlinks to the current files.
func modTime(path string) time.Time {
	fi, err := os.Stat(path)
	if err != nil {
		return time.Time{}
	}
	return fi.ModTime()
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
