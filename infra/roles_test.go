package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// The calls the functions make, checked against the roles this app
// synthesizes. The AWS-shaped local stack (`make aws-local`, the root
// module's shared/awslocal) runs the functions and records every AWS call
// they make; testdata/aws-calls.json is its record of the platform's main
// paths (the root module's TestRecordedCallsAreAllowed keeps it whole:
// every call it sees made must be in it). Its check mode (`aws-local
// --check-calls`) evaluates the record against a template's roles: here,
// against the synthesized one, so a role of the CDK app that would refuse a
// call the functions make fails here as it would on a stack deployed with
// `cdk deploy`. The root module is run as a program rather than imported:
// this module never compiles the platform's code.

var awsLocal struct {
	once sync.Once
	bin  string
	err  error
}

// awsLocalBinary builds the root module's aws-local command once.
func awsLocalBinary(t *testing.T) string {
	t.Helper()
	awsLocal.once.Do(func() {
		dir, err := os.MkdirTemp("", "infra-aws-local-")
		if err != nil {
			awsLocal.err = err
			return
		}
		awsLocal.bin = filepath.Join(dir, "aws-local")
		cmd := exec.Command("go", "build", "-o", awsLocal.bin, "./functions/aws-local")
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			awsLocal.err = err
			awsLocal.bin = string(out)
		}
	})
	if awsLocal.err != nil {
		t.Fatalf("go build ./functions/aws-local: %v\n%s", awsLocal.err, awsLocal.bin)
	}
	return awsLocal.bin
}

// withoutCDKStatement removes statement index of a role's inline policy.
func withoutCDKStatement(role, policyName string, index int) func(resources map[string]any) {
	return func(resources map[string]any) {
		r := resources[role].(map[string]any)["Properties"].(map[string]any)
		for _, p := range r["Policies"].([]any) {
			pm := p.(map[string]any)
			if pm["PolicyName"] != policyName {
				continue
			}
			doc := pm["PolicyDocument"].(map[string]any)
			st := doc["Statement"].([]any)
			doc["Statement"] = append(st[:index:index], st[index+1:]...)
			return
		}
		panic(role + " has no policy " + policyName)
	}
}

// TestCDKRolesAllowRecordedCalls: every recorded call of every function is
// allowed by the function's role as synthesized (and EventBridge
// Scheduler's invocation by SchedulerRole); without one statement of a
// role, exactly the calls it allowed are refused.
func TestCDKRolesAllowRecordedCalls(t *testing.T) {
	template, _ := synthesized(t)
	bin := awsLocalBinary(t)
	cases := []struct {
		name    string
		mutate  func(resources map[string]any)
		refused []string // "Function action" of each refused call, in the record's order
	}{
		{"as synthesized", nil, nil},
		{"FilesFunctionRole without its files/ statement", withoutCDKStatement("FilesFunctionRole", "bucket", 0),
			[]string{"FilesFunction s3:PutObject"}},
		{"AdminFunctionRole without PassRole to the scheduler", withoutCDKStatement("AdminFunctionRole", "schedules", 1),
			[]string{"AdminFunction iam:PassRole"}},
		{"DispatcherFunctionRole without the stream", withoutCDKStatement("DispatcherFunctionRole", "stream", 0),
			[]string{"DispatcherFunction dynamodb:DescribeStream", "DispatcherFunction dynamodb:GetRecords", "DispatcherFunction dynamodb:GetShardIterator"}},
		{"TeardownFunctionRole without its listing", withoutCDKStatement("TeardownFunctionRole", "deployed-code", 0),
			[]string{"TeardownFunction iam:ListRoles", "TeardownFunction lambda:ListFunctions"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tmpl := template
			if tc.mutate != nil {
				tmpl = mutatedCDK(t, template, tc.mutate)
			}
			path := filepath.Join(t.TempDir(), "bot-platform.template.json")
			if err := os.WriteFile(path, tmpl, 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(bin, "--check-calls", "testdata/aws-calls.json", "--check-roles", path)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := cmd.ProcessState.ExitCode()
			if code == 2 || (err != nil && code < 0) {
				t.Fatalf("the check could not be made: %v\n%s", err, stderr.String())
			}
			var got []string
			for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
				// AccessDenied (<template>): <Function> <action> on <resource>
				if _, rest, ok := strings.Cut(line, "): "); ok && strings.HasPrefix(line, "AccessDenied (") {
					f := strings.Fields(rest)
					got = append(got, f[0]+" "+f[1])
				}
			}
			if strings.Join(got, "; ") != strings.Join(tc.refused, "; ") {
				t.Fatalf("refused %v, want %v\n%s", got, tc.refused, stdout.String())
			}
			if want := map[bool]int{true: 0, false: 1}[len(tc.refused) == 0]; code != want {
				t.Fatalf("exit %d, want %d\n%s", code, want, stdout.String())
			}
		})
	}
}
