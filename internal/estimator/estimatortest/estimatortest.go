// Package estimatortest builds Karmada estimator calls and TLS material for
// tests: what karmada-scheduler sends, without Karmada.
package estimatortest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	mathrand "math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	v1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/internal/estimator/karmadapb"
)

// Component is one component of a set: replicas pods asking res, on nodes
// matching nodeSelector.
func Component(name string, replicas int32, res v1.ResourceList, nodeSelector map[string]string) *karmadapb.Component {
	rr := &karmadapb.ComponentReplicaRequirements{ResourceRequestBytes: map[string][]byte{}}
	for n, q := range res {
		raw, err := q.Marshal()
		if err != nil {
			panic(err)
		}
		rr.ResourceRequestBytes[string(n)] = raw
	}
	if nodeSelector != nil {
		rr.NodeClaim = &karmadapb.NodeClaim{NodeSelector: nodeSelector}
	}
	return &karmadapb.Component{Name: name, Replicas: replicas, ReplicaRequirements: rr}
}

// Replicas is MaxAvailableReplicas' requirement for one replica.
func Replicas(namespace string, res v1.ResourceList) *karmadapb.ReplicaRequirements {
	c := Component("replica", 1, res, nil)
	return &karmadapb.ReplicaRequirements{Namespace: namespace, ResourceRequestBytes: c.ReplicaRequirements.ResourceRequestBytes}
}

// WithObject names the workload as karmada-scheduler does (metadata key
// "object").
func WithObject(ctx context.Context, kind, namespace, name string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "object", fmt.Sprintf("kind=%s, name=%s/%s", kind, namespace, name))
}

// TLS are PEM files: a CA, a server certificate for 127.0.0.1 and
// localhost, and a client certificate, all signed by the CA.
type TLS struct {
	CA, ServerCert, ServerKey, ClientCert, ClientKey string
}

// WriteTLS writes fresh TLS material into dir.
func WriteTLS(dir string) (*TLS, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "phalanx-test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	t := &TLS{CA: filepath.Join(dir, "ca.crt")}
	if err := writePEM(t.CA, "CERTIFICATE", caDER); err != nil {
		return nil, err
	}
	leaf := func(serial int64, cn string, usage x509.ExtKeyUsage, certPath, keyPath string) error {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return err
		}
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return err
		}
		if err := writePEM(certPath, "CERTIFICATE", der); err != nil {
			return err
		}
		return writePEM(keyPath, "EC PRIVATE KEY", keyDER)
	}
	t.ServerCert, t.ServerKey = filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key")
	t.ClientCert, t.ClientKey = filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key")
	if err := leaf(2, "phalanx-estimator", x509.ExtKeyUsageServerAuth, t.ServerCert, t.ServerKey); err != nil {
		return nil, err
	}
	if err := leaf(3, "karmada-scheduler", x509.ExtKeyUsageClientAuth, t.ClientCert, t.ClientKey); err != nil {
		return nil, err
	}
	return t, nil
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}

// Dial connects as karmada-scheduler does: TLS verifying the server with
// the CA, presenting the client certificate when withClientCert.
func Dial(addr string, t *TLS, withClientCert bool) (karmadapb.EstimatorClient, *grpc.ClientConn, error) {
	creds := insecure.NewCredentials()
	if t != nil {
		raw, err := os.ReadFile(t.CA)
		if err != nil {
			return nil, nil, err
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(raw)
		cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		if withClientCert {
			cert, err := tls.LoadX509KeyPair(t.ClientCert, t.ClientKey)
			if err != nil {
				return nil, nil, err
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		creds = credentials.NewTLS(cfg)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, nil, err
	}
	return karmadapb.NewEstimatorClient(conn), conn, nil
}

// FreeAddress returns a 127.0.0.1 address whose port was free on every
// interface a moment ago. The port is drawn below Linux's ephemeral range
// (32768 on): a port the kernel hands out (":0") can be taken again by any
// outgoing connection before the process it was meant for binds it.
func FreeAddress() (string, error) {
	for range 200 {
		port := 20000 + mathrand.IntN(12000)
		l, err := net.Listen("tcp", fmt.Sprintf(":%d", port))
		if err != nil {
			continue
		}
		l.Close()
		return fmt.Sprintf("127.0.0.1:%d", port), nil
	}
	return "", fmt.Errorf("no free port in 20000-31999")
}
