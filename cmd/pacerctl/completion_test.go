package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestCompletionKnowsEverySetting: the bash and zsh completions
// (packaging/completion) offer every command and every setting pacerctl
// takes, so that a new setting cannot be forgotten there.
func TestCompletionKnowsEverySetting(t *testing.T) {
	commands := []string{"status", "watch", "set", "add", "direction", "remove", "flows", "keys", "reload", "help"}
	settings := []string{"rate", "burst", "peak", "mode", "backlog", "capped", "before",
		"per_rate", "per_burst", "per_peak", "per_keys", "per_idle", "parent", "ceil", "cburst", "priority", "weight",
		"match.src", "match.dst", "match.proto", "match.sport", "match.dport", "match.dscp"}
	settings = append(settings, queueKeys...)
	settings = append(settings, emulationKeys...)
	settings = append(settings, globalKeys...)
	for _, file := range []string{"../../packaging/completion/pacerctl.bash", "../../packaging/completion/_pacerctl"} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		words := strings.FieldsFunc(string(b), func(r rune) bool {
			return strings.ContainsRune(" \t\n\"'()|:", r)
		})
		has := map[string]bool{}
		for _, w := range words {
			has[w] = true
		}
		for _, c := range commands {
			if !has[c] {
				t.Errorf("%s: no command %s", file, c)
			}
		}
		for _, s := range settings {
			if !has[s+"="] {
				t.Errorf("%s: no setting %s=", file, s)
			}
		}
	}
	if bash, err := exec.LookPath("bash"); err == nil {
		if out, err := exec.Command(bash, "-n", "../../packaging/completion/pacerctl.bash").CombinedOutput(); err != nil {
			t.Errorf("bash -n: %v\n%s", err, out)
		}
	}
}
