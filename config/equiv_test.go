package config_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/pacer-dev/pacer/config"
)

// TestEquivalence loads every testdata/equiv/*.yaml and compares the
// config it makes (as JSON, with the absolute trace paths written
// <equiv>/...) with the .json beside it. The .json files were written by
// shaper.ParseConfig before the config package was moved out of package
// shaper, so this proves that the move changed no effective setting; it
// stays as a regression test of defaults and decoding. Settings added
// since (metrics.hosts, link sharing) are not in the .json files: every
// setting that is must load to the same value, and a new one may only be
// added beside them.
func TestEquivalence(t *testing.T) {
	dir, err := filepath.Abs("testdata/equiv")
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) < 5 {
		t.Fatalf("want the equivalence inputs in %s, have %d (%v)", dir, len(files), err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		t.Run(name, func(t *testing.T) {
			c, err := config.Load(f)
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.MarshalIndent(c, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(bytes.ReplaceAll(got, []byte(dir+"/"), []byte("<equiv>/")), '\n')
			want, err := os.ReadFile(filepath.Join(dir, name+".json"))
			if err != nil {
				t.Fatal(err)
			}
			var gotV, wantV any
			if err := json.Unmarshal(got, &gotV); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(want, &wantV); err != nil {
				t.Fatal(err)
			}
			for _, d := range missing(wantV, gotV, "") {
				t.Errorf("%s: %s (testdata/equiv/%s.json)", name, d, name)
			}
		})
	}
}

// missing lists where got differs from want, but for keys of objects that
// want does not have.
func missing(want, got any, path string) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: %v, want an object", path, got)}
		}
		var out []string
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				out = append(out, fmt.Sprintf("%s.%s: missing, want %v", path, k, wv))
				continue
			}
			out = append(out, missing(wv, gv, path+"."+k)...)
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{fmt.Sprintf("%s: %v, want %v", path, got, want)}
		}
		var out []string
		for i := range w {
			out = append(out, missing(w[i], g[i], fmt.Sprintf("%s[%d]", path, i))...)
		}
		return out
	}
	if !reflect.DeepEqual(want, got) {
		return []string{fmt.Sprintf("%s: %v, want %v", path, got, want)}
	}
	return nil
}
