package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	link    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	heading = regexp.MustCompile(`(?m)^#+ (.+)$`)
	// notInAnchor is what GitHub drops from a heading to make its anchor.
	notInAnchor = regexp.MustCompile(`[^\p{L}\p{N} _-]`)
)

// anchors returns the anchors of a Markdown file's headings, as GitHub
// makes them.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	for _, m := range heading.FindAllStringSubmatch(text, -1) {
		a := strings.ToLower(notInAnchor.ReplaceAllString(strings.TrimSpace(m[1]), ""))
		out[strings.ReplaceAll(a, " ", "-")] = true
	}
	return out
}

// TestLinksLeadSomewhere: every relative link of the README, of the
// results' README and of the pages here names a file or folder of the
// repository, and every #anchor a heading of the page it names.
func TestLinksLeadSomewhere(t *testing.T) {
	pages, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, "../README.md", "../e2e/results/README.md")
	checked := 0
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), file)
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s: link %s: %v", page, target, err)
					continue
				}
			}
			if anchor != "" {
				text, err := os.ReadFile(path)
				if err != nil || !anchors(string(text))[anchor] {
					t.Errorf("%s: link %s: no heading #%s in %s", page, target, anchor, path)
				}
			}
			checked++
		}
	}
	if checked < 20 {
		t.Errorf("only %d links checked", checked)
	}
	t.Logf("%d links in %d pages lead somewhere", checked, len(pages))
}

// TestReadmeStaysShort: the README is a front page of at most 200 lines,
// no section over 40; the rest lives here.
func TestReadmeStaysShort(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 200 {
		t.Errorf("README.md has %d lines, want at most 200", len(lines))
	}
	section, n := "(top)", 0
	for _, l := range append(lines, "## (end)") {
		if strings.HasPrefix(l, "## ") {
			if n > 40 {
				t.Errorf("README section %q has %d lines, want at most 40", section, n)
			}
			section, n = l, 0
		}
		n++
	}
}
