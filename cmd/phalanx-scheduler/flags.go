package main

import (
	"fmt"
	"os"
	"strings"

	"sigs.k8s.io/yaml"
)

// honourKubeconfig makes --kubeconfig work together with --config. Upstream
// kube-scheduler ignores --kubeconfig when --config is given, which silently
// points the scheduler at in-cluster credentials. phalanx writes the flag into
// a copy of the config file (the flag wins over clientConnection.kubeconfig)
// and passes that copy instead.
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
	var doc map[string]any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("parsing --config %s: %w", config, err)
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
	out, err := yaml.Marshal(doc)
	if err != nil {
		return nil, err
	}
	f, err := os.CreateTemp("", "phalanx-scheduler-config-*.yaml")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Write(out); err != nil {
		return nil, err
	}
	rewritten := append([]string{}, args...)
	if strings.Contains(rewritten[configAt], "=") {
		rewritten[configAt] = "--config=" + f.Name()
	} else {
		rewritten[configAt+1] = f.Name()
	}
	return rewritten, nil
}

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
