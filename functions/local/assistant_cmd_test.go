package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"strings"
	"testing"

	"github.com/botforge/platform/shared/command"
)

// TestAssistantCreateFlags: --help documents every flag the issue names;
// bad input is a usage error before any call (the deployment itself is
// shared/assistant's TestCreateAnswersFromDocuments and make assistant-e2e,
// which runs this command of the real binary).
func TestAssistantCreateFlags(t *testing.T) {
	var out, errb bytes.Buffer
	env := command.Env{Prog: "local assistant create", Stdout: &out, Stderr: &errb}
	if err := assistantCreate(context.Background(), env, []string{"--help"}); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help: %v", err)
	}
	for _, f := range []string{"api-url", "token", "workspace", "name", "instructions", "model", "documents", "temperature",
		"passages", "cite-sources", "fallback", "history", "handover", "max-tokens", "kb-ids", "json"} {
		if !strings.Contains(errb.String(), "-"+f+" ") && !strings.Contains(errb.String(), "-"+f+"\n") {
			t.Errorf("--help does not document --%s:\n%s", f, errb.String())
		}
	}
	for _, args := range [][]string{
		{},                       // no name
		{"--name", "x", "stray"}, // a positional argument
		{"--name", "x", "--temperature", "3"},
		{"--name", "x", "--passages", "0"},
		{"--name", "x", "--history", "51"},
		{"--name", "x", "--bogus"},
	} {
		errb.Reset()
		err := assistantCreate(context.Background(), env, append(args, "--api-url", "http://127.0.0.1:1", "--token", "t"))
		if !errors.Is(err, command.ErrUsage) {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
}
