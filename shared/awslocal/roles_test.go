package awslocal_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/botforge/platform/shared/awslocal"
)

// TestReadRoles: the roles ReadRoles reads from template.yaml are the ones
// the stack runs each function with (ReadTemplate), and the role
// EventBridge Scheduler assumes is there by name.
func TestReadRoles(t *testing.T) {
	tpl, err := awslocal.ReadTemplate("../../template.yaml", "../../Makefile", map[string]string{"PagingKey": "00"}, "")
	if err != nil {
		t.Fatal(err)
	}
	roles, err := awslocal.ReadRoles("../../template.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range tpl.Functions {
		if !reflect.DeepEqual(roles[f.LogicalID], f.Policy) {
			t.Errorf("%s: ReadRoles %+v, ReadTemplate %+v", f.LogicalID, roles[f.LogicalID], f.Policy)
		}
	}
	if len(roles[awslocal.StackName+"-SchedulerRole-LOCAL"]) == 0 {
		t.Error("no SchedulerRole by its name")
	}
}

// TestCheckCalls evaluates the record of calls the stack made
// (TestRecordedCallsAreAllowed keeps it whole) against template.yaml's
// roles, and against a copy of it without the files function's statement
// on files/ keys: exactly the presigned upload's s3:PutObject is refused.
func TestCheckCalls(t *testing.T) {
	calls, err := awslocal.ReadCalls(callRecord)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		template func(t *testing.T) string
		refused  []string // function action
	}{
		{"template.yaml", func(*testing.T) string { return "../../template.yaml" }, nil},
		{"FilesFunctionRole without its files/ statement", func(t *testing.T) string {
			return withoutStatement(t, "FilesFunctionRole", "bucket", 0)
		}, []string{"FilesFunction s3:PutObject"}},
		{"AdminFunctionRole without PassRole to the scheduler", func(t *testing.T) string {
			return withoutStatement(t, "AdminFunctionRole", "schedules", 1)
		}, []string{"AdminFunction iam:PassRole"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			roles, err := awslocal.ReadRoles(tc.template(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			refused, err := awslocal.CheckCalls(calls, roles)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range refused {
				got = append(got, c.Function+" "+c.Action)
			}
			if !reflect.DeepEqual(got, tc.refused) {
				t.Fatalf("refused %v, want %v", got, tc.refused)
			}
		})
	}
	_, err = awslocal.CheckCalls([]awslocal.CallCount{{Call: awslocal.Call{Function: "NoSuchFunction", Action: "s3:GetObject", Allowed: true}}}, awslocal.Roles{})
	if err == nil || !strings.Contains(err.Error(), "NoSuchFunction") {
		t.Errorf("a function the roles do not know: %v", err)
	}
}
