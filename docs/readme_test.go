package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestInstallCommandsSetTheImage checks every install, configuration and
// upgrade command in the README and docs/: the rendered manifests name an
// image that is not published, so a `kubectl apply` of a file with an image
// must go through `sed` replacing exactly that image (a changed default
// fails here), and every `helm upgrade` of the chart keeps the user's image
// (`--reuse-values` or `image.repository`).
func TestInstallCommandsSetTheImage(t *testing.T) {
	withImage := map[string]string{} // repo path -> its phalanx image
	for _, pattern := range []string{"../manifests/install/*.yaml", "../manifests/replace/*.yaml"} {
		files, err := filepath.Glob(pattern)
		if err != nil || len(files) == 0 {
			t.Fatalf("no %s: %v", pattern, err)
		}
		for _, file := range files {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if m := imageField.FindSubmatch(raw); m != nil && strings.Contains(string(m[1]), "/phalanx:") {
				withImage[strings.TrimPrefix(file, "../")] = string(m[1])
			}
		}
	}
	if len(withImage) < 3 {
		t.Fatalf("phalanx images found only in %v; want the scheduler, the controller and the replace-mode static pod", withImage)
	}
	var image string
	for _, img := range withImage {
		if image != "" && img != image {
			t.Fatalf("the manifests name two images: %v", withImage)
		}
		image = img
	}
	docs, _ := filepath.Glob("*.md")
	docs = append(docs, "../README.md", "../charts/phalanx/README.md", "../charts/phalanx/values-replace.yaml")
	checked := 0
	for _, doc := range docs {
		raw, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range commandLines(string(raw)) {
			if m := sedImage.FindStringSubmatch(line); m != nil {
				checked++
				if m[1] != image {
					t.Errorf("%s: %q replaces %q, but the manifests name %q", doc, line, m[1], image)
				}
				continue
			}
			if strings.Contains(line, "kubectl apply") {
				for path := range withImage {
					dir := filepath.Dir(path) + "/"
					for _, arg := range strings.Fields(line) {
						arg = strings.TrimSuffix(arg, "/")
						if arg == path || arg+"/" == dir && strings.HasPrefix(path, "manifests/install/") {
							t.Errorf("%s: %q applies %s as it stands, with the unpublished image %s: pipe it through sed", doc, line, path, image)
						}
					}
				}
			}
			if helmInstall.MatchString(line) {
				checked++
				if !strings.Contains(line, "image.repository") {
					t.Errorf("%s: %q installs the unpublished default image: add --set image.repository", doc, line)
				}
			}
			if helmUpgrade.MatchString(line) {
				checked++
				if !strings.Contains(line, "--reuse-values") && !strings.Contains(line, "image.repository") {
					t.Errorf("%s: %q resets the image to the unpublished default: add --reuse-values (or --set image.repository)", doc, line)
				}
			}
		}
	}
	if checked < 5 {
		t.Fatalf("only %d install or upgrade commands found in the docs", checked)
	}
}

var (
	imageField  = regexp.MustCompile(`(?m)^\s*image:\s*"?([^"\s]+)`)
	sedImage    = regexp.MustCompile(`sed "s\|([^|]+)\|[^|]+\|"`)
	helmUpgrade = regexp.MustCompile(`helm upgrade\s.*charts/phalanx`)
	helmInstall = regexp.MustCompile(`helm install\s.*charts/phalanx`)
)

// commandLines are a document's lines with shell continuations joined and
// inline code marks dropped, so a command split over lines or quoted in
// prose reads as one.
func commandLines(doc string) []string {
	var out []string
	cur := ""
	for _, l := range strings.Split(doc, "\n") {
		l = strings.ReplaceAll(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "#")), "`", "")
		if strings.HasSuffix(l, "\\") {
			cur += strings.TrimSuffix(l, "\\") + " "
			continue
		}
		out = append(out, cur+l)
		cur = ""
	}
	return out
}
