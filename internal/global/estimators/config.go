// Package estimators is the global tier's client pool for the member
// clusters' scheduler estimators: it finds each member's estimator the way
// karmada-scheduler does (a Service per cluster on the Karmada control
// plane), keeps one connection per cluster, and asks how many whole sets of
// a job fit there now.
package estimators

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Flag names, for errors and AddFlags.
const (
	FlagNamespace          = "--estimator-service-namespace"
	FlagPrefix             = "--estimator-service-prefix"
	FlagPort               = "--estimator-port"
	FlagTimeout            = "--estimator-timeout"
	FlagCAFile             = "--estimator-ca-file"
	FlagCertFile           = "--estimator-cert-file"
	FlagKeyFile            = "--estimator-key-file"
	FlagInsecureSkipVerify = "--estimator-insecure-skip-verify"
)

// Config says where the members' estimators are and how to call them; the
// defaults are karmada-scheduler's (--scheduler-estimator-*).
type Config struct {
	// Namespace and Prefix name the Service <Prefix>-<cluster> in Namespace.
	Namespace, Prefix string
	// Port is the Service port looked up (and dialled when no Service exists).
	Port int32
	// Timeout bounds one Sets call, and all of one SetsAll.
	Timeout time.Duration
	// CAFile verifies the estimators' certificates; CertFile and KeyFile are
	// this client's certificate. InsecureSkipVerify skips the server check.
	// All unset: plaintext, as Karmada.
	CAFile, CertFile, KeyFile string
	InsecureSkipVerify        bool
}

// DefaultConfig is karmada-scheduler's default.
func DefaultConfig() Config {
	return Config{Namespace: "karmada-system", Prefix: "karmada-scheduler-estimator", Port: 10352, Timeout: 3 * time.Second}
}

// AddFlags binds c to fs; c's values are the defaults shown.
func (c *Config) AddFlags(fs *pflag.FlagSet) {
	name := func(flag string) string { return strings.TrimPrefix(flag, "--") }
	fs.StringVar(&c.Namespace, name(FlagNamespace), c.Namespace, "Namespace of the members' estimator Services on the Karmada control plane.")
	fs.StringVar(&c.Prefix, name(FlagPrefix), c.Prefix, "Estimator Service name prefix: the Service of cluster C is <prefix>-C.")
	fs.Int32Var(&c.Port, name(FlagPort), c.Port, "Estimator Service port.")
	fs.DurationVar(&c.Timeout, name(FlagTimeout), c.Timeout, "Deadline of one binding's calls to all members' estimators.")
	fs.StringVar(&c.CAFile, name(FlagCAFile), c.CAFile, "CA (PEM) verifying the estimators' certificates. Unset with no other TLS flag: plaintext.")
	fs.StringVar(&c.CertFile, name(FlagCertFile), c.CertFile, "Client certificate (PEM) presented to the estimators.")
	fs.StringVar(&c.KeyFile, name(FlagKeyFile), c.KeyFile, "Client key (PEM).")
	fs.BoolVar(&c.InsecureSkipVerify, name(FlagInsecureSkipVerify), c.InsecureSkipVerify, "Speak TLS without verifying the estimators' certificates.")
}

// Validate checks the values without reading files; errors name the flag.
func (c Config) Validate() error {
	if errs := validation.IsDNS1123Label(c.Namespace); len(errs) > 0 {
		return fmt.Errorf("%s: %q: %s", FlagNamespace, c.Namespace, strings.Join(errs, "; "))
	}
	if c.Prefix == "" {
		return fmt.Errorf("%s: required", FlagPrefix)
	}
	if c.Port < 1 || c.Port > 65535 {
		return fmt.Errorf("%s: %d is not in 1-65535", FlagPort, c.Port)
	}
	if c.Timeout <= 0 {
		return fmt.Errorf("%s: %v must be positive", FlagTimeout, c.Timeout)
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return fmt.Errorf("%s and %s: give both or neither", FlagCertFile, FlagKeyFile)
	}
	if c.CAFile != "" && c.InsecureSkipVerify {
		return fmt.Errorf("%s and %s: give one (skipping verification ignores the CA)", FlagCAFile, FlagInsecureSkipVerify)
	}
	return nil
}

// credentials reads the TLS files; errors name the flag. Unlike Karmada, a
// client certificate alone turns TLS on (verified against the system roots)
// rather than being ignored.
func (c Config) credentials() (credentials.TransportCredentials, error) {
	if c.CAFile == "" && c.CertFile == "" && !c.InsecureSkipVerify {
		return insecure.NewCredentials(), nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: c.InsecureSkipVerify} //nolint:gosec // opt-in by flag
	if c.CAFile != "" {
		raw, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", FlagCAFile, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(raw) {
			return nil, fmt.Errorf("%s: %s holds no PEM certificate", FlagCAFile, c.CAFile)
		}
		cfg.RootCAs = pool
	}
	if c.CertFile != "" {
		load := func() (*tls.Certificate, error) {
			pair, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
			if err != nil {
				return nil, fmt.Errorf("%s, %s: %w", FlagCertFile, FlagKeyFile, err)
			}
			return &pair, nil
		}
		if _, err := load(); err != nil {
			return nil, err
		}
		// Read at each handshake so a rotated Secret needs no restart;
		// connections are cached, so handshakes are rare.
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return load() }
	}
	return credentials.NewTLS(cfg), nil
}
