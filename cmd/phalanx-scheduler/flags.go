package main

import (
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
	"sigs.k8s.io/yaml"
)

// honourKubeconfig makes --kubeconfig win over clientConnection.kubeconfig when
// --config is given too. Upstream kube-scheduler ignores --kubeconfig then,
// which silently points the scheduler at in-cluster credentials.
//
// kube-scheduler reads the config file itself (options.ApplyTo, with no hook
// between loading the file and building the client), so phalanx hands it a
// merged copy. The copy lives in an anonymous in-memory file (memfd) passed
// as /proc/self/fd/N: nothing is written to disk, so a read-only root
// filesystem — the static pod of replace mode — works.
func honourKubeconfig(args []string) ([]string, error) {
	configAt, config := flagValue(args, "config")
	_, kubeconfig := flagValue(args, "kubeconfig")
	if configAt < 0 || kubeconfig == "" {
		return args, nil
	}
	raw, err := os.ReadFile(config)
	if err != nil {
		return nil, fmt.Errorf("reading --config: %w", err)
	}
	merged, err := withKubeconfig(raw, kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("parsing --config %s: %w", config, err)
	}
	path, err := inMemoryFile("phalanx-scheduler-config", merged)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig with --config: keeping the merged config in memory: %w "+
			"(set clientConnection.kubeconfig in %s and drop --kubeconfig)", err, config)
	}
	rewritten := append([]string{}, args...)
	if strings.Contains(rewritten[configAt], "=") {
		rewritten[configAt] = "--config=" + path
	} else {
		rewritten[configAt+1] = path
	}
	return rewritten, nil
}

// withKubeconfig returns the config document with clientConnection.kubeconfig
// set; every other field is kept.
func withKubeconfig(raw []byte, kubeconfig string) ([]byte, error) {
	var doc map[string]any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	if doc == nil {
		doc = map[string]any{}
	}
	conn, _ := doc["clientConnection"].(map[string]any)
	if conn == nil {
		conn = map[string]any{}
	}
	conn["kubeconfig"] = kubeconfig
	doc["clientConnection"] = conn
	return yaml.Marshal(doc)
}

// inMemoryFile returns a path that reads back content for the life of the
// process, without touching any filesystem.
func inMemoryFile(name string, content []byte) (string, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_ALLOW_SEALING)
	if err != nil {
		return "", fmt.Errorf("memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), name)
	if _, err := f.Write(content); err != nil {
		f.Close()
		return "", err
	}
	// Read-only from here on. The descriptor stays open (f is never closed)
	// so that kube-scheduler can open the path later.
	if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_WRITE|unix.F_SEAL_GROW|unix.F_SEAL_SHRINK|unix.F_SEAL_SEAL); err != nil {
		f.Close()
		return "", fmt.Errorf("sealing: %w", err)
	}
	keep = append(keep, f)
	return fmt.Sprintf("/proc/self/fd/%d", fd), nil
}

// keep holds the in-memory files open for the life of the process.
var keep []*os.File

// flagValue finds --name=value or --name value; it returns the index of the
// flag and its value, or -1.
func flagValue(args []string, name string) (int, string) {
	for i, a := range args {
		if a == "--" {
			break
		}
		for _, prefix := range []string{"--" + name, "-" + name} {
			if v, ok := strings.CutPrefix(a, prefix+"="); ok {
				return i, v
			}
			if a == prefix && i+1 < len(args) {
				return i, args[i+1]
			}
		}
	}
	return -1, ""
}
