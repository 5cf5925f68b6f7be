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
	cs := tpl.FunctionByName("ChatStreamFunction")
	if cs == nil || cs.URL == nil || cs.URL.AuthType != "NONE" || !cs.URL.Streaming() || cs.Timeout != 900 {
		t.Fatalf("chat stream function: %+v", cs)
	}
	for _, f := range tpl.Functions {
		if f.URL != nil && f != cs {
			t.Errorf("%s has a function URL too", f.LogicalID)
		}
	}
	if _, ok := tpl.Outputs()["ChatStreamUrl"]; ok {
		t.Error("ChatStreamUrl resolves before its URL is served")
	}
	tpl.SetFunctionURL(cs, "http://127.0.0.1:1234/")
	out := tpl.Outputs()
	if out["ChatStreamUrl"] != "http://127.0.0.1:1234/" || out["ApiUrl"] != "http://api.local" || out["TableName"] != tpl.TableName {
		t.Errorf("outputs %v", out)
	}
}

// TestStreamLanes: the dispatcher's ParallelizationFactor is read from the
// template, and the stream mapping's lanes (its concurrent batches) keep
// one outbox shard's records in one lane (in order) while spreading the
// shards over the lanes.
func TestStreamLanes(t *testing.T) {
	tpl, err := ReadTemplate("../../template.yaml", "../../Makefile", map[string]string{"PagingKey": "00"}, "")
	if err != nil {
		t.Fatal(err)
	}
	d := tpl.FunctionByName("DispatcherFunction")
	if d == nil || d.Stream == nil || d.Stream.Parallelization != 10 {
		t.Fatalf("dispatcher's stream: %+v", d.Stream)
	}
	keys := func(pk, sk string) map[string]any {
		return map[string]any{"pk": map[string]any{"S": pk}, "sk": map[string]any{"S": sk}}
	}
	used := map[int]bool{}
	for i := range 100 {
		pk := "OUTBOX#bot_" + string(rune('a'+i%26)) + "#" + string(rune('A'+i/26))
		first := laneOf(keys(pk, "1"), 10)
		for _, sk := range []string{"2", "3", "4"} {
			if l := laneOf(keys(pk, sk), 10); l != first {
				t.Fatalf("%s: records in lanes %d and %d", pk, first, l)
			}
		}
		used[first] = true
	}
	if len(used) < 5 {
		t.Errorf("100 shards in %d lanes of 10", len(used))
	}
}
