package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

func TestMain(m *testing.M) {
	code := m.Run()
	jsii.Close()
	os.Exit(code)
}

var synth struct {
	once      sync.Once
	template  []byte // the stack's CloudFormation template (JSON)
	lambdaDir string
	err       error
}

// synthesized synthesizes the stack once per test binary, as `cdk synth`
// does (cdk.json's context), with a stand-in bootstrap file per function
// (the tests check the template, not the binaries).
func synthesized(t testing.TB) (template []byte, lambdaDir string) {
	t.Helper()
	synth.once.Do(func() { synth.template, synth.lambdaDir, synth.err = doSynth() })
	if synth.err != nil {
		t.Fatalf("synth: %v", synth.err)
	}
	return synth.template, synth.lambdaDir
}

func doSynth() ([]byte, string, error) {
	dir, err := os.MkdirTemp("", "infra-test-")
	if err != nil {
		return nil, "", err
	}
	lambdaDir := filepath.Join(dir, "lambda")
	for _, f := range Functions {
		if err := os.MkdirAll(filepath.Join(lambdaDir, f.Dir), 0o755); err != nil {
			return nil, "", err
		}
		// Distinct contents: distinct assets.
		if err := os.WriteFile(filepath.Join(lambdaDir, f.Dir, "bootstrap"), []byte("stand-in for "+f.Dir), 0o755); err != nil {
			return nil, "", err
		}
	}
	var cdkJSON struct {
		Context map[string]any `json:"context"`
	}
	raw, err := os.ReadFile("cdk.json")
	if err != nil {
		return nil, "", err
	}
	if err := json.Unmarshal(raw, &cdkJSON); err != nil {
		return nil, "", fmt.Errorf("cdk.json: %w", err)
	}
	ctx := map[string]any{}
	for k, v := range cdkJSON.Context {
		ctx[k] = v
	}
	ctx["lambdaDir"] = lambdaDir
	// What SAM CLI sets to build CDK apps: each function's metadata names
	// its asset's source directory (the agreement test reads it).
	ctx["aws:cdk:enable-asset-metadata"] = true
	ctx["aws:cdk:disable-asset-staging"] = true
	app := awscdk.NewApp(&awscdk.AppProps{Context: &ctx, Outdir: jsii.String(filepath.Join(dir, "cdk.out"))})
	stack, err := NewPlatformStack(app, optionsFrom(app))
	if err != nil {
		return nil, "", err
	}
	tmpl := assertions.Template_FromStack(stack, nil)
	b, err := json.Marshal(tmpl.ToJSON())
	return b, lambdaDir, err
}

// TestMissingBinaries: without the function binaries the app says how to
// build them instead of synthesizing a stack with missing code.
func TestMissingBinaries(t *testing.T) {
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
	_, err := NewPlatformStack(app, StackOptions{StackName: "x", LambdaDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "make -C .. lambda") {
		t.Fatalf("err = %v, want a hint to build the binaries", err)
	}
}
