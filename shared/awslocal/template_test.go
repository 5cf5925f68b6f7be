package awslocal

import (
	"testing"

	"github.com/botforge/platform/shared/iampolicy"
)

// The repository's template resolves: every function has its package, role
// and environment, and the routes, stream and S3 sources are there.
func TestReadTemplate(t *testing.T) {
	tpl, err := ReadTemplate("../../template.yaml", "../../Makefile", map[string]string{"PagingKey": "00"}, "http://api.local")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range tpl.Functions {
		t.Logf("%s %s %s timeout=%d routes=%d statements=%d", f.LogicalID, f.Name, f.Package, f.Timeout, len(f.Routes), len(f.Policy))
		if f.Env["PLATFORM_TABLE"] != tpl.TableName || tpl.TableName == "" {
			t.Errorf("%s: PLATFORM_TABLE %q", f.LogicalID, f.Env["PLATFORM_TABLE"])
		}
	}
	admin := tpl.FunctionByName(StackName + "-admin")
	if admin == nil || admin.Package != "./functions/admin" {
		t.Fatalf("admin: %+v", admin)
	}
	if d, _ := iampolicy.Evaluate(admin.Policy, iampolicy.Request{Action: "dynamodb:PutItem", Resource: tpl.TableARN}); d != iampolicy.Allow {
		t.Errorf("admin PutItem on the table: %v", d)
	}
	if d, _ := iampolicy.Evaluate(admin.Policy, iampolicy.Request{Action: "dynamodb:Scan", Resource: tpl.TableARN}); d != iampolicy.ImplicitDeny {
		t.Errorf("admin Scan: %v", d)
	}
	up := tpl.FunctionByName("UploadCompletionFunction")
	if up.Env["PLATFORM_BUCKET"] != tpl.BucketName || up.S3 == nil || up.S3.Prefix != "files/" {
		t.Errorf("upload completion: %v %+v (bucket %s)", up.Env, up.S3, tpl.BucketName)
	}
	d := tpl.FunctionByName("DispatcherFunction")
	if d.Stream == nil || d.Stream.StreamARN != tpl.StreamARN || len(d.Stream.Filters) != 1 || len(d.Schedule) != 1 {
		t.Errorf("dispatcher: %+v %v", d.Stream, d.Schedule)
	}
	if len(tpl.Routes) < 10 {
		t.Errorf("routes: %v", tpl.Routes)
	}
}
