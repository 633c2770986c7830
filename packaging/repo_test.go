package packaging_test

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// maxTrackedSize is the largest file the repository may track: build
// outputs (a 28 MB bench/bench was committed once) and large generated
// data stay out of it. The largest tracked file is Mahimahi's trace,
// configs/traces/tmobile-lte-short.down, under 1 MB.
const maxTrackedSize = 1 << 20

// TestNoLargeTrackedFiles fails for every file git tracks (its staged
// blob, as git ls-files lists it) that is larger than 1 MB, naming it.
// Outside a git checkout it skips, except under CI=true.
func TestNoLargeTrackedFiles(t *testing.T) {
	gitCheckout(t)
	// The staged blobs: git ls-files -s names each one's object, and
	// git cat-file --batch-check gives its size.
	ls := exec.Command("git", "-C", repoRoot, "ls-files", "-z", "-s")
	out, err := ls.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	var objects, names []string
	for _, entry := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		// "MODE OBJECT STAGE\tPATH"
		meta, name, ok := strings.Cut(entry, "\t")
		f := strings.Fields(meta)
		if !ok || len(f) != 3 {
			t.Fatalf("git ls-files -s: unexpected entry %q", entry)
		}
		if f[0] == "160000" { // a submodule's commit, not a blob
			continue
		}
		objects = append(objects, f[1])
		names = append(names, name)
	}
	if len(names) == 0 {
		t.Fatal("git ls-files lists no file")
	}
	check := exec.Command("git", "-C", repoRoot, "cat-file", "--batch-check=%(objectsize)")
	check.Stdin = strings.NewReader(strings.Join(objects, "\n") + "\n")
	out, err = check.Output()
	if err != nil {
		t.Fatalf("git cat-file --batch-check: %v", err)
	}
	sizes := strings.Fields(string(out))
	if len(sizes) != len(names) {
		t.Fatalf("git cat-file gave %d sizes for %d files", len(sizes), len(names))
	}
	for i, s := range sizes {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("git cat-file: size %q of %s", s, names[i])
		}
		if n > maxTrackedSize {
			t.Errorf("%s is tracked and %d bytes, over %d: a build output goes in .gitignore, large data out of the repository", names[i], n, maxTrackedSize)
		}
	}
	if !t.Failed() {
		t.Logf("%d tracked files, none over %d bytes", len(names), maxTrackedSize)
	}
}

// gitCheckout skips t unless the repository is a git checkout with git
// installed (the module's zip, or a source archive, is not); under
// CI=true it fails instead.
func gitCheckout(t *testing.T) {
	t.Helper()
	needs(t, "git")
	if err := exec.Command("git", "-C", repoRoot, "rev-parse", "--git-dir").Run(); err != nil {
		unavailable(t, "not a git checkout")
	}
}
