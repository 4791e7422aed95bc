// Command crdpatch sets schema fields that controller-gen markers cannot reach
// (such as maxLength on the values of a corev1.ResourceList map) in a generated
// CRD manifest, in place, for every version of the CRD:
//
//	crdpatch FILE PATH=JSON...
//
// PATH is dotted and relative to a version's openAPIV3Schema, e.g.
// properties.spec.properties.guarantee.additionalProperties.maxLength=64.
// Every object on PATH but the last key must already exist.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"sigs.k8s.io/yaml"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "crdpatch:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) < 2 {
		return fmt.Errorf("usage: crdpatch FILE PATH=JSON...")
	}
	file := args[0]
	in, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	doc, err := decode(in)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	// Refuse to patch if re-encoding alone would change the file: the output
	// must stay byte-identical to controller-gen's except for the patches.
	if out, err := encode(doc); err != nil || !bytes.Equal(out, in) {
		return fmt.Errorf("%s: does not round-trip; is it controller-gen output?", file)
	}
	spec, _ := doc["spec"].(map[string]any)
	versions, _ := spec["versions"].([]any)
	if len(versions) == 0 {
		return fmt.Errorf("%s: no spec.versions", file)
	}
	for _, a := range args[1:] {
		path, raw, ok := strings.Cut(a, "=")
		if !ok {
			return fmt.Errorf("%q: want PATH=JSON", a)
		}
		var val any
		if err := json.Unmarshal([]byte(raw), &val); err != nil {
			return fmt.Errorf("%q: %w", a, err)
		}
		keys := strings.Split(path, ".")
		for i, v := range versions {
			obj, _ := v.(map[string]any)
			obj = child(obj, "schema", "openAPIV3Schema")
			obj = child(obj, keys[:len(keys)-1]...)
			if obj == nil {
				return fmt.Errorf("%s: versions[%d]: %s: no such object", file, i, path)
			}
			obj[keys[len(keys)-1]] = val
		}
	}
	out, err := encode(doc)
	if err != nil {
		return err
	}
	return os.WriteFile(file, out, 0o644)
}

func child(obj map[string]any, keys ...string) map[string]any {
	for _, k := range keys {
		if obj == nil {
			return nil
		}
		obj, _ = obj[k].(map[string]any)
	}
	return obj
}

func decode(b []byte) (map[string]any, error) {
	j, err := yaml.YAMLToJSON(bytes.TrimPrefix(b, []byte("---\n")))
	if err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(j))
	d.UseNumber()
	var doc map[string]any
	return doc, d.Decode(&doc)
}

func encode(doc map[string]any) ([]byte, error) {
	b, err := yaml.Marshal(doc)
	if err != nil {
		return nil, err
	}
	return append([]byte("---\n"), b...), nil
}
