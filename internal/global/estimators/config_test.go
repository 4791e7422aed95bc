package estimators

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/phalanx-sched/phalanx/internal/estimator/estimatortest"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string // in the error; empty for none
	}{
		{name: "defaults", edit: func(*Config) {}},
		{name: "TLS with client cert", edit: func(c *Config) { c.CAFile, c.CertFile, c.KeyFile = "ca", "crt", "key" }},
		{name: "no namespace", edit: func(c *Config) { c.Namespace = "" }, want: FlagNamespace},
		{name: "bad namespace", edit: func(c *Config) { c.Namespace = "Karmada_System" }, want: FlagNamespace},
		{name: "no prefix", edit: func(c *Config) { c.Prefix = "" }, want: FlagPrefix},
		{name: "port 0", edit: func(c *Config) { c.Port = 0 }, want: FlagPort},
		{name: "port too big", edit: func(c *Config) { c.Port = 70000 }, want: FlagPort},
		{name: "no timeout", edit: func(c *Config) { c.Timeout = 0 }, want: FlagTimeout},
		{name: "cert without key", edit: func(c *Config) { c.CertFile = "crt" }, want: FlagKeyFile},
		{name: "key without cert", edit: func(c *Config) { c.KeyFile = "key" }, want: FlagCertFile},
		{name: "CA and skip verify", edit: func(c *Config) { c.CAFile, c.InsecureSkipVerify = "ca", true }, want: FlagInsecureSkipVerify},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tc.edit(&cfg)
			err := cfg.Validate()
			if tc.want == "" && err != nil {
				t.Errorf("Validate: %v, want nil", err)
			}
			if tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("Validate: %v, want an error naming %s", err, tc.want)
			}
		})
	}
}

func TestNewReadsTLSFiles(t *testing.T) {
	dir := t.TempDir()
	files, err := estimatortest.WriteTLS(dir)
	if err != nil {
		t.Fatal(err)
	}
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string // in the error; empty for none
	}{
		{name: "all files", edit: func(c *Config) { c.CAFile, c.CertFile, c.KeyFile = files.CA, files.ClientCert, files.ClientKey }},
		{name: "missing CA", edit: func(c *Config) { c.CAFile = missing }, want: FlagCAFile},
		{name: "CA not PEM", edit: func(c *Config) { c.CAFile = notPEM }, want: FlagCAFile},
		{name: "missing cert", edit: func(c *Config) { c.CAFile, c.CertFile, c.KeyFile = files.CA, missing, files.ClientKey }, want: FlagCertFile},
		{name: "key of another cert", edit: func(c *Config) { c.CAFile, c.CertFile, c.KeyFile = files.CA, files.ClientCert, files.ServerKey }, want: FlagKeyFile},
		{name: "invalid config", edit: func(c *Config) { c.Port = -1 }, want: FlagPort},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tc.edit(&cfg)
			p, err := New(cfg, &fakeServices{})
			if tc.want == "" && err != nil {
				t.Errorf("New: %v, want nil", err)
			}
			if tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("New: %v, want an error naming %s", err, tc.want)
			}
			if p != nil {
				p.Close()
			}
		})
	}
}

func TestAddFlags(t *testing.T) {
	cfg := DefaultConfig()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	cfg.AddFlags(fs)
	if err := fs.Parse([]string{FlagPort + "=9000", FlagTimeout + "=1500ms", FlagCAFile + "=/ca.crt", FlagInsecureSkipVerify + "=false"}); err != nil {
		t.Fatal(err)
	}
	want := DefaultConfig()
	want.Port, want.Timeout, want.CAFile = 9000, 1500*time.Millisecond, "/ca.crt"
	if cfg != want {
		t.Errorf("after parsing: %+v, want %+v", cfg, want)
	}
	for _, flag := range []string{FlagNamespace, FlagPrefix, FlagCertFile, FlagKeyFile} {
		if fs.Lookup(strings.TrimPrefix(flag, "--")) == nil {
			t.Errorf("flag %s not bound", flag)
		}
	}
}
