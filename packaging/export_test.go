package packaging_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBuildFromCommittedFiles builds pacerd and pacerctl from the
// committed files alone (git archive HEAD, no work tree, no ignored or
// generated file), as go install ...@latest does from the module's zip:
// everything they embed (the dashboard's assets, the Redis script) is
// committed. The binaries run.
func TestBuildFromCommittedFiles(t *testing.T) {
	slow(t)
	needs(t, "git", "tar")
	src := t.TempDir()
	archive := filepath.Join(t.TempDir(), "src.tar")
	run(t, "git", "-C", repoRoot, "archive", "-o", archive, "HEAD")
	run(t, "tar", "-xf", archive, "-C", src)
	bin := t.TempDir()
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin+"/", "./cmd/pacerd", "./cmd/pacerctl")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=readonly")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build from git archive HEAD: %v\n%s", err, out)
	}
	for _, prog := range []string{"pacerd", "pacerctl"} {
		out := run(t, filepath.Join(bin, prog), "-version")
		if !strings.HasPrefix(out, prog+" ") {
			t.Errorf("%s -version: %q", prog, out)
		}
	}
}
