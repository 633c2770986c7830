package config_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pacer-dev/pacer/config"
)

// TestEquivalence loads every testdata/equiv/*.yaml and compares the
// config it makes (as indented JSON, with the absolute trace paths written
// <equiv>/...) with the .json beside it. The .json files were written by
// shaper.ParseConfig before the config package was moved out of package
// shaper, so this proves that the move changed no effective setting; it
// stays as a regression test of defaults and decoding.
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
			if !bytes.Equal(got, want) {
				t.Errorf("%s loads to\n%s\nwant (testdata/equiv/%s.json)\n%s", name, got, name, want)
			}
		})
	}
}
