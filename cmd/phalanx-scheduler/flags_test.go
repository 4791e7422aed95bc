package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestHonourKubeconfig(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nclientConnection:\n  kubeconfig: /etc/kubernetes/scheduler.conf\n  qps: 100\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		args       []string
		wantConfig int // index of the config arg that must be rewritten, -1 for none
	}{
		{name: "equals form", args: []string{"--config=" + cfg, "--kubeconfig=/k"}, wantConfig: 0},
		{name: "space form", args: []string{"--v=2", "--config", cfg, "--kubeconfig", "/k"}, wantConfig: 2},
		{name: "no kubeconfig", args: []string{"--config=" + cfg}, wantConfig: -1},
		{name: "no config", args: []string{"--kubeconfig=/k"}, wantConfig: -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp)
			got, err := honourKubeconfig(tc.args)
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantConfig < 0 {
				if len(got) != len(tc.args) || got[0] != tc.args[0] {
					t.Fatalf("args changed: %v", got)
				}
				return
			}
			_, path := flagValue(got, "config")
			if path == cfg {
				t.Fatalf("config not rewritten: %v", got)
			}
			// The merged copy must not be a file on disk: the static pod of
			// replace mode has a read-only root filesystem.
			if !strings.HasPrefix(path, "/proc/self/fd/") {
				t.Fatalf("merged config at %s, want an in-memory file", path)
			}
			if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
				t.Fatalf("%s was written to $TMPDIR", entries[0].Name())
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var doc struct {
				ClientConnection struct {
					Kubeconfig string  `json:"kubeconfig"`
					QPS        float64 `json:"qps"`
				} `json:"clientConnection"`
			}
			if err := yaml.Unmarshal(raw, &doc); err != nil {
				t.Fatal(err)
			}
			if doc.ClientConnection.Kubeconfig != "/k" || doc.ClientConnection.QPS != 100 {
				t.Fatalf("clientConnection = %+v, want kubeconfig /k and qps kept", doc.ClientConnection)
			}
		})
	}
}
