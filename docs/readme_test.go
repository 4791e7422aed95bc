package docs

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

var setImage = regexp.MustCompile(`(?m)^kubectl -n (\S+) set image deployment/(\S+) ([a-z0-9-]+)=(\S+)`)

// TestReadmeSetsImages checks the README's kubectl install path: its
// `kubectl set image` commands name Deployments and containers that
// manifests/install really has, and cover every container that runs the
// phalanx image (manifests/install names an image that is not published).
func TestReadmeSetsImages(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("../manifests/install/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests/install: %v", err)
	}
	// namespace/deployment/container -> image
	containers := map[string]string{}
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range bytes.Split(raw, []byte("\n---")) {
			var meta struct{ Kind string }
			if err := yaml.Unmarshal(doc, &meta); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if meta.Kind != "Deployment" {
				continue
			}
			var d appsv1.Deployment
			if err := yaml.Unmarshal(doc, &d); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			for _, c := range d.Spec.Template.Spec.Containers {
				containers[d.Namespace+"/"+d.Name+"/"+c.Name] = c.Image
			}
		}
	}
	if len(containers) == 0 {
		t.Fatal("no Deployment in manifests/install")
	}
	set := map[string]bool{}
	for _, m := range setImage.FindAllStringSubmatch(string(readme), -1) {
		key := m[1] + "/" + m[2] + "/" + m[3]
		image, ok := containers[key]
		if !ok {
			t.Errorf("README.md: %q names no container of manifests/install (have %v)", m[0], keys(containers))
		} else if tag(m[4]) != tag(image) {
			t.Errorf("README.md: %q sets tag %q; manifests/install (the chart's appVersion) runs %q", m[0], tag(m[4]), tag(image))
		}
		set[key] = true
	}
	for key, image := range containers {
		if strings.Contains(image, "/phalanx:") && !set[key] {
			t.Errorf("README.md: no `kubectl -n %s set image deployment/%s %s=...` for the image %s of manifests/install",
				strings.Split(key, "/")[0], strings.Split(key, "/")[1], strings.Split(key, "/")[2], image)
		}
	}
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// tag is the tag of an image reference ("" without one).
func tag(image string) string {
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		return image[i+1:]
	}
	return ""
}
