package main

import (
	"bytes"
	"fmt"
	"os"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestOperationsYAML prints, with OPERATIONS_YAML=1, template.yaml's
// "alarms and dashboard" resources from operationsResources (the CDK
// app's): paste them over that section after changing them. The
// agreement test fails while the two differ.
func TestOperationsYAML(t *testing.T) {
	if os.Getenv("OPERATIONS_YAML") == "" {
		t.Skip("OPERATIONS_YAML=1 prints template.yaml's alarms and dashboard section")
	}
	for _, r := range operationsResources() {
		res := map[string]any{"Type": r.Type, "Properties": r.Props}
		if r.Condition != "" {
			res["Condition"] = r.Condition
		}
		if len(r.DependsOn) > 0 {
			res["DependsOn"] = r.DependsOn
		}
		var buf bytes.Buffer
		enc := yaml.NewEncoder(&buf)
		enc.SetIndent(2)
		if err := enc.Encode(map[string]any{r.ID: res}); err != nil {
			t.Fatal(err)
		}
		for _, l := range splitLines(buf.String()) {
			fmt.Println("  " + l)
		}
	}
}

func splitLines(s string) []string {
	var out []string
	for len(s) > 0 {
		i := 0
		for i < len(s) && s[i] != '\n' {
			i++
		}
		out = append(out, s[:i])
		if i < len(s) {
			i++
		}
		s = s[i:]
	}
	return out
}
