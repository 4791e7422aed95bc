package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/phalanx-sched/phalanx/internal/testcluster"
)

// docBlock returns the shell block that follows "<!-- deploy-doc-test: name"
// in docs/deploy.md, dedented, with sudo dropped (the sandbox is root).
func docBlock(t *testing.T, doc, name string) string {
	t.Helper()
	_, after, ok := strings.Cut(doc, "<!-- deploy-doc-test: "+name)
	if !ok {
		t.Fatalf("docs/deploy.md has no deploy-doc-test: %s marker", name)
	}
	_, after, ok = strings.Cut(after, "```sh\n")
	if !ok {
		t.Fatalf("no sh block after the %s marker", name)
	}
	block, _, ok := strings.Cut(after, "```")
	if !ok {
		t.Fatalf("unterminated sh block after the %s marker", name)
	}
	var lines []string
	for _, l := range strings.Split(block, "\n") {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		lines = append(lines, strings.TrimPrefix(l, "sudo "))
	}
	return strings.Join(lines, "\n")
}

// TestDeployDocSteps runs the replace-mode install and rollback steps of
// docs/deploy.md, as written, on a fake control-plane node (bubblewrap: its
// own /etc/kubernetes and /root), and checks the backup restores the node.
func TestDeployDocSteps(t *testing.T) {
	if err := testcluster.BwrapAvailable(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(repoRoot(), "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	dir := t.TempDir()
	etc, root, work := filepath.Join(dir, "etc-kubernetes"), filepath.Join(dir, "root"), filepath.Join(dir, "work")
	stock := []byte("# kubeadm's kube-scheduler static pod\n")
	for _, d := range []string{filepath.Join(etc, "manifests"), root, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(path string, b []byte) {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(etc, "manifests", "kube-scheduler.yaml"), stock)
	var rendered = map[string][]byte{}
	for _, f := range []string{"config.yaml", "kube-scheduler.yaml"} {
		b, err := os.ReadFile(filepath.Join(repoRoot(), "manifests", "replace", f))
		if err != nil {
			t.Fatal(err)
		}
		rendered[f] = b
		write(filepath.Join(work, f), b)
	}
	run := func(name string) {
		t.Helper()
		script := docBlock(t, doc, name)
		cmd := exec.Command("bwrap",
			"--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
			"--symlink", "usr/lib64", "/lib64", "--symlink", "usr/sbin", "/sbin",
			"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
			"--bind", etc, "/etc/kubernetes", "--bind", root, "/root", "--bind", work, "/home/admin",
			"--chdir", "/home/admin", "--die-with-parent",
			"/bin/sh", "-euc", script)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("docs/deploy.md %s steps failed: %v\n%s\n%s", name, err, script, out)
		}
	}
	read := func(path string) []byte {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v", err)
		}
		return b
	}

	run("install")
	if got := read(filepath.Join(etc, "manifests", "kube-scheduler.yaml")); !bytes.Equal(got, rendered["kube-scheduler.yaml"]) {
		t.Errorf("after install, /etc/kubernetes/manifests/kube-scheduler.yaml is not phalanx's")
	}
	if got := read(filepath.Join(etc, "phalanx", "config.yaml")); !bytes.Equal(got, rendered["config.yaml"]) {
		t.Errorf("after install, /etc/kubernetes/phalanx/config.yaml is not the replace config")
	}
	if got := read(filepath.Join(root, "phalanx-backup", "kube-scheduler.yaml")); !bytes.Equal(got, stock) {
		t.Errorf("the backup does not hold the stock manifest")
	}
	if ents, _ := os.ReadDir(filepath.Join(etc, "manifests")); len(ents) != 1 {
		t.Errorf("/etc/kubernetes/manifests holds %d files; the kubelet would run each", len(ents))
	}

	run("rollback")
	if got := read(filepath.Join(etc, "manifests", "kube-scheduler.yaml")); !bytes.Equal(got, stock) {
		t.Errorf("after rollback, /etc/kubernetes/manifests/kube-scheduler.yaml is not the stock manifest")
	}
	if _, err := os.Stat(filepath.Join(etc, "phalanx")); !os.IsNotExist(err) {
		t.Errorf("after rollback, /etc/kubernetes/phalanx still exists (%v)", err)
	}
}
