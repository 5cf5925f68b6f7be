package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/awslabs/goformation/v7"
	"gopkg.in/yaml.v3"
)

const samTemplate = "../template.yaml"

// samModel is the model of a SAM template file.
func samModel(t *testing.T, path string) stackModel {
	t.Helper()
	tmpl, err := parseTemplate(path)
	if err != nil {
		t.Fatalf("goformation: %s: %v", path, err)
	}
	m, err := modelOf(tmpl, buildPackages(".."), "")
	if err != nil {
		t.Fatalf("%s:\n%v", path, err)
	}
	return m
}

// cdkModel is the model of a synthesized CDK template (JSON).
func cdkModel(t *testing.T, template []byte, lambdaDir string) stackModel {
	t.Helper()
	template, err := liftInvokedViaFunctionUrl(template)
	if err != nil {
		t.Fatalf("CDK template: %v", err)
	}
	tmpl, err := goformation.ParseJSONWithOptions(template, canonicalOptions(""))
	if err != nil {
		t.Fatalf("goformation: CDK template: %v", err)
	}
	m, err := modelOf(tmpl, nil, lambdaDir)
	if err != nil {
		t.Fatalf("CDK template:\n%v", err)
	}
	return m
}

// differences lists where two models differ, one line per leaf.
func differences(a, b stackModel) []string {
	var av, bv any
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	_ = json.Unmarshal(ja, &av)
	_ = json.Unmarshal(jb, &bv)
	var out []string
	diffValues("", av, bv, &out)
	return out
}

func diffValues(path string, a, b any, out *[]string) {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			diffValues(path+"."+k, am[k], bm[k], out)
		}
		return
	}
	if !reflect.DeepEqual(a, b) {
		show := func(v any) string {
			if v == nil {
				return "(missing)"
			}
			j, _ := json.Marshal(v)
			return string(j)
		}
		*out = append(*out, fmt.Sprintf("%s:\n    template.yaml: %s\n    CDK:           %s", strings.TrimPrefix(path, "."), show(a), show(b)))
	}
}

// TestSAMAndCDKAgree: template.yaml and the CDK app describe one and the
// same stack: functions (code, runtime, memory, timeout, environment, role,
// who may invoke them), routes, table keys and indexes, bucket (encryption,
// access, CORS, notification), schedule group and schedules, roles and
// their policies, log groups, parameters and outputs, the table's stream
// and the functions it invokes, the functions invoked on a schedule.
func TestSAMAndCDKAgree(t *testing.T) {
	cdkJSON, lambdaDir := synthesized(t)
	sam := samModel(t, samTemplate)
	cdk := cdkModel(t, cdkJSON, lambdaDir)
	if d := differences(sam, cdk); len(d) > 0 {
		t.Fatalf("template.yaml and the CDK app disagree:\n%s", strings.Join(d, "\n"))
	}

	// The comparison is not vacuous: the model holds the whole stack.
	if len(sam.Functions) != len(Functions) || len(sam.Routes) != 12 || len(sam.Tables) != 1 || len(sam.Buckets) != 1 ||
		len(sam.ScheduleGroups) != 1 || len(sam.LogGroups) != len(Functions)+3 || len(sam.Roles) != len(Functions)+3 || len(sam.Outputs) != 10 || len(sam.StreamTier) != 14 {
		t.Fatalf("model misses parts of the stack: %d functions, %d routes, %d tables, %d buckets, %d schedule groups, %d log groups, %d roles, %d outputs, %d stream tier resources",
			len(sam.Functions), len(sam.Routes), len(sam.Tables), len(sam.Buckets), len(sam.ScheduleGroups), len(sam.LogGroups), len(sam.Roles), len(sam.Outputs), len(sam.StreamTier))
	}
	// The table's capacity mode (TableCapacityMode): on demand, or
	// provisioned from the minimum with auto scaling on the table and each
	// index (its 6 scalable targets and 6 policies compared whole).
	if tb := sam.Tables["Table"]; tb.BillingMode != "${Fn::If(TableProvisioned, PROVISIONED, PAY_PER_REQUEST)}" || tb.Throughput == "" ||
		tb.Indexes["gsi1"].Throughput != tb.Throughput || tb.Indexes["gsi2"].Throughput != tb.Throughput || len(sam.TableCapacity) != 12 {
		t.Fatalf("the table's capacity mode: billing %q, throughput %q, indexes %+v, %d auto scaling resources", tb.BillingMode, tb.Throughput, tb.Indexes, len(sam.TableCapacity))
	}
	// The dispatcher's triggers: outbox inserts on the table's stream, a
	// one-minute schedule.
	outbox := sam.StreamSources["DispatcherFunction <- ${Table.StreamArn}"]
	if sam.Tables["Table"].Stream != "KEYS_ONLY" || len(sam.StreamSources) != 2 ||
		fmt.Sprint(outbox.Filters) != `[{"dynamodb":{"Keys":{"pk":{"S":[{"prefix":"OUTBOX#"}]}}},"eventName":["INSERT"]}]` ||
		outbox.Parallelization != 10 ||
		outbox.StartingPosition != "TRIM_HORIZON" || outbox.MaxRetries != -1 || outbox.MaxRecordAge != -1 || !outbox.Enabled {
		t.Fatalf("the dispatcher's stream trigger: table stream %q, sources %+v", sam.Tables["Table"].Stream, sam.StreamSources)
	}
	// The Chat API's streams: the fan-out on inserted signals, the
	// streaming function's public URL.
	signals := sam.StreamSources["ChatFanoutFunction <- ${Table.StreamArn}"]
	if fmt.Sprint(signals.Filters) != `[{"dynamodb":{"Keys":{"pk":{"S":[{"prefix":"CHATSIG#"}]}}},"eventName":["INSERT"]}]` ||
		sam.Functions["ChatStreamFunction"].URL != "NONE RESPONSE_STREAM" || sam.Functions["ChatStreamFunction"].Timeout != 900 {
		t.Fatalf("the chat streams: fan-out %+v, stream function %+v", signals, sam.Functions["ChatStreamFunction"])
	}
	// Every table-stream mapping: bounded retries (the dispatcher's:
	// until the records leave the stream, above), halving, a failure queue
	// of its own (issue 33).
	for key, src := range sam.StreamSources {
		queue := strings.TrimSuffix(src.Function, "Function") + "FailureQueue"
		bounded := src.MaxRetries >= 0 && src.MaxRetries <= 10 && src.MaxRecordAge >= 0 && src.MaxRecordAge <= 86400
		if key == "DispatcherFunction <- ${Table.StreamArn}" {
			bounded = true
		}
		if !bounded || !src.Bisect ||
			src.OnFailure != "${"+queue+".Arn}" || sam.Operations[queue] == "" {
			t.Fatalf("%s: retries %d, record age %d, bisect %v, on failure %q (want ${%s.Arn}, a queue of the stack)", key,
				src.MaxRetries, src.MaxRecordAge, src.Bisect, src.OnFailure, queue)
		}
	}
	// Throttling at the edge: the parameters' limits on every route.
	if sam.APIThrottle != "burst ${ApiThrottlingBurstLimit} rate ${ApiThrottlingRateLimit}" {
		t.Fatalf("the API's default route throttling: %q", sam.APIThrottle)
	}
	// The custom domain: the API, the console and the dispatcher's webhook
	// URLs at https://<DomainName> when given.
	public := "${Fn::If(HasDomain, https://${DomainName}, ${HttpApi.ApiEndpoint})}"
	if sam.Outputs["ApiUrl"].Value != public || sam.Functions["DispatcherFunction"].Env["PLATFORM_PUBLIC_URL"] != public ||
		!strings.Contains(sam.Operations["ApiDomainMapping"], `"Condition":"HasDomain"`) || !strings.Contains(sam.Operations["ApiDomainName"], `"CertificateArn":"${CertificateArn}"`) {
		t.Fatalf("custom domain: ApiUrl %q, the dispatcher's PLATFORM_PUBLIC_URL %q, mapping %s", sam.Outputs["ApiUrl"].Value,
			sam.Functions["DispatcherFunction"].Env["PLATFORM_PUBLIC_URL"], sam.Operations["ApiDomainMapping"])
	}
	// The web ACL: a rate-based rule per address, on the load balancer.
	if !strings.Contains(sam.Operations["StreamWebAcl"], `"RateBasedStatement":{"AggregateKeyType":"IP","Limit":`) ||
		!strings.Contains(sam.Operations["StreamWebAclAssociation"], `"ResourceArn":"${StreamLoadBalancer}"`) {
		t.Fatalf("web ACL: %s %s", sam.Operations["StreamWebAcl"], sam.Operations["StreamWebAclAssociation"])
	}
	// Alarms (issue 33): each notifies the topic; every function has its
	// errors and throttles alarms; and the rest of what the runbook names.
	alarms := 0
	for id, j := range sam.Operations {
		if !strings.Contains(j, `"AWS::CloudWatch::Alarm"`) {
			continue
		}
		alarms++
		if !strings.Contains(j, `"AlarmActions":["${AlarmTopic}"]`) || !strings.Contains(j, `"OKActions":["${AlarmTopic}"]`) {
			t.Errorf("%s does not notify AlarmTopic: %s", id, j)
		}
	}
	for _, f := range Functions {
		for _, a := range []string{"Errors", "Throttles"} {
			if !strings.Contains(sam.Operations[f.ID+"Function"+a+"Alarm"], `"MetricName":"`+a+`"`) {
				t.Errorf("no %s alarm of %sFunction", a, f.ID)
			}
		}
	}
	for _, id := range []string{"Api5xxAlarm", "ChatStreamConcurrencyAlarm", "TableThrottlesAlarm", "DispatcherIteratorAgeAlarm", "ChatFanoutIteratorAgeAlarm",
		"DeliveryFailuresAlarm", "OutboxAgeAlarm", "DispatcherFailureQueueAlarm", "ChatFanoutFailureQueueAlarm", "AlarmTopic", "AlarmEmailSubscription", "Dashboard"} {
		if sam.Operations[id] == "" {
			t.Errorf("no %s", id)
		}
	}
	if want := 2*len(Functions) + 9; alarms != want {
		t.Errorf("%d alarms, want %d", alarms, want)
	}
	if sc := sam.FunctionSchedules["DispatcherFunction rate(1 minute)"]; len(sam.FunctionSchedules) != 2 || !sc.Enabled || !sc.Permitted {
		t.Fatalf("the dispatcher's schedule: %+v", sam.FunctionSchedules)
	}
	// The sweeper's: pending deletions finished every five minutes.
	if sc := sam.FunctionSchedules["SweeperFunction rate(5 minutes)"]; !sc.Enabled || !sc.Permitted {
		t.Fatalf("the sweeper's schedule: %+v", sam.FunctionSchedules)
	}
	if len(sam.Other) > 0 {
		t.Fatalf("resources the model does not compare: %v", sam.Other)
	}
	// The catch-all route: the platform's MethodNotFound for unknown paths.
	if r := sam.Routes["$default"]; r.Function != "FilesFunction" || len(sam.ManagedPolicies) != 1 {
		t.Fatalf("the $default route: %+v; managed policies: %v", r, sam.ManagedPolicies)
	}
	if testing.Verbose() {
		j, _ := json.MarshalIndent(sam, "", "  ")
		t.Logf("model:\n%s", j)
	}
}

// TestAgreementCatchesDrift: removing a route or an environment variable
// from either description makes the agreement check fail, naming it.
func TestAgreementCatchesDrift(t *testing.T) {
	cdkJSON, lambdaDir := synthesized(t)
	sam := samModel(t, samTemplate)
	cdk := cdkModel(t, cdkJSON, lambdaDir)

	for _, tc := range []struct {
		name   string
		mutate func(t *testing.T) (samM, cdkM stackModel)
		want   []string // in the differences
	}{
		{"route removed from template.yaml", func(t *testing.T) (stackModel, stackModel) {
			return samModel(t, mutatedSAM(t, "Resources", "TablesFunction", "Properties", "Events", "TablesRoot")), cdk
		}, []string{"routes.ANY /v1/tables"}},
		{"environment variable removed from template.yaml", func(t *testing.T) (stackModel, stackModel) {
			return samModel(t, mutatedSAM(t, "Resources", "FilesFunction", "Properties", "Environment", "Variables", "PLATFORM_BUCKET")), cdk
		}, []string{"functions.FilesFunction.env.PLATFORM_BUCKET"}},
		{"global environment variable removed from template.yaml", func(t *testing.T) (stackModel, stackModel) {
			return samModel(t, mutatedSAM(t, "Globals", "Function", "Environment", "Variables", "PLATFORM_TABLE")), cdk
		}, []string{"functions.ChatFunction.env.PLATFORM_TABLE", "functions.UploadCompletionFunction.env.PLATFORM_TABLE"}},
		{"route removed from the CDK template", func(t *testing.T) (stackModel, stackModel) {
			return sam, cdkModel(t, mutatedCDK(t, cdkJSON, func(res map[string]any) {
				for id, r := range res {
					if props, _ := r.(map[string]any)["Properties"].(map[string]any); props["RouteKey"] == "ANY /v1/chat/{proxy+}" {
						delete(res, id)
					}
				}
			}), lambdaDir)
		}, []string{"routes.ANY /v1/chat/{proxy+}"}},
		{"environment variable removed from the CDK template", func(t *testing.T) (stackModel, stackModel) {
			return sam, cdkModel(t, mutatedCDK(t, cdkJSON, func(res map[string]any) {
				vars := res["AdminFunction"].(map[string]any)["Properties"].(map[string]any)["Environment"].(map[string]any)["Variables"].(map[string]any)
				delete(vars, "PLATFORM_SCHEDULER_ROLE_ARN")
			}), lambdaDir)
		}, []string{"functions.AdminFunction.env.PLATFORM_SCHEDULER_ROLE_ARN"}},
		{"policy statement removed from the CDK template", func(t *testing.T) (stackModel, stackModel) {
			return sam, cdkModel(t, mutatedCDK(t, cdkJSON, func(res map[string]any) {
				props := res["AdminFunctionRole"].(map[string]any)["Properties"].(map[string]any)
				var kept []any
				for _, p := range props["Policies"].([]any) {
					if p.(map[string]any)["PolicyName"] != "schedules" {
						kept = append(kept, p)
					}
				}
				props["Policies"] = kept
			}), lambdaDir)
		}, []string{"roles.AdminFunctionRole.statements"}},
		{"index removed from the CDK template", func(t *testing.T) (stackModel, stackModel) {
			return sam, cdkModel(t, mutatedCDK(t, cdkJSON, func(res map[string]any) {
				props := res["Table"].(map[string]any)["Properties"].(map[string]any)
				props["GlobalSecondaryIndexes"] = props["GlobalSecondaryIndexes"].([]any)[:1]
			}), lambdaDir)
		}, []string{"tables.Table.indexes.gsi2"}},
		{"stream event removed from template.yaml", func(t *testing.T) (stackModel, stackModel) {
			return samModel(t, mutatedSAM(t, "Resources", "DispatcherFunction", "Properties", "Events", "Outbox")), cdk
		}, []string{"streamSources.DispatcherFunction <- ${Table.StreamArn}"}},
		{"schedule removed from template.yaml", func(t *testing.T) (stackModel, stackModel) {
			return samModel(t, mutatedSAM(t, "Resources", "DispatcherFunction", "Properties", "Events", "Retries")), cdk
		}, []string{"functionSchedules.DispatcherFunction rate(1 minute)", "functions.DispatcherFunction.invokedBy"}},
		{"stream filter removed from template.yaml", func(t *testing.T) (stackModel, stackModel) {
			return samModel(t, mutatedSAM(t, "Resources", "DispatcherFunction", "Properties", "Events", "Outbox", "Properties", "FilterCriteria")), cdk
		}, []string{"streamSources.DispatcherFunction <- ${Table.StreamArn}.filters"}},
		{"stream specification removed from template.yaml", func(t *testing.T) (stackModel, stackModel) {
			return samModel(t, mutatedSAM(t, "Resources", "Table", "Properties", "StreamSpecification")), cdk
		}, []string{"tables.Table.stream"}},
		{"event source mapping removed from the CDK template", func(t *testing.T) (stackModel, stackModel) {
			return sam, cdkModel(t, mutatedCDK(t, cdkJSON, func(res map[string]any) {
				deleteOfType(res, "AWS::Lambda::EventSourceMapping")
			}), lambdaDir)
		}, []string{"streamSources.DispatcherFunction <- ${Table.StreamArn}"}},
		{"stream filter changed in the CDK template", func(t *testing.T) (stackModel, stackModel) {
			return sam, cdkModel(t, mutatedCDK(t, cdkJSON, func(res map[string]any) {
				props := res["DispatcherFunctionOutbox"].(map[string]any)["Properties"].(map[string]any)
				props["FilterCriteria"] = map[string]any{"Filters": []any{map[string]any{"Pattern": `{"eventName":["INSERT","MODIFY"],"dynamodb":{"Keys":{"pk":{"S":[{"prefix":"OUTBOX#"}]}}}}`}}}
			}), lambdaDir)
		}, []string{"streamSources.DispatcherFunction <- ${Table.StreamArn}.filters"}},
		{"stream parallelization changed in the CDK template", func(t *testing.T) (stackModel, stackModel) {
			return sam, cdkModel(t, mutatedCDK(t, cdkJSON, func(res map[string]any) {
				res["DispatcherFunctionOutbox"].(map[string]any)["Properties"].(map[string]any)["ParallelizationFactor"] = 1
			}), lambdaDir)
		}, []string{"streamSources.DispatcherFunction <- ${Table.StreamArn}.parallelizationFactor"}},
		{"schedule rule removed from the CDK template", func(t *testing.T) (stackModel, stackModel) {
			return sam, cdkModel(t, mutatedCDK(t, cdkJSON, func(res map[string]any) {
				deleteOfType(res, "AWS::Events::Rule")
			}), lambdaDir)
		}, []string{"functionSchedules.DispatcherFunction rate(1 minute)"}},
		{"schedule permission removed from the CDK template", func(t *testing.T) (stackModel, stackModel) {
			return sam, cdkModel(t, mutatedCDK(t, cdkJSON, func(res map[string]any) {
				for id, r := range res {
					if props, _ := r.(map[string]any)["Properties"].(map[string]any); props["Principal"] == "events.amazonaws.com" {
						delete(res, id)
					}
				}
			}), lambdaDir)
		}, []string{"functionSchedules.DispatcherFunction rate(1 minute).permitted", "functions.DispatcherFunction.invokedBy"}},
		{"stream specification removed from the CDK template", func(t *testing.T) (stackModel, stackModel) {
			return sam, cdkModel(t, mutatedCDK(t, cdkJSON, func(res map[string]any) {
				delete(res["Table"].(map[string]any)["Properties"].(map[string]any), "StreamSpecification")
			}), lambdaDir)
		}, []string{"tables.Table.stream"}},
		{"$default route removed from template.yaml", func(t *testing.T) (stackModel, stackModel) {
			return samModel(t, mutatedSAM(t, "Resources", "FilesFunction", "Properties", "Events", "CatchAll")), cdk
		}, []string{"routes.$default"}},
		{"$default route removed from the CDK template", func(t *testing.T) (stackModel, stackModel) {
			return sam, cdkModel(t, mutatedCDK(t, cdkJSON, func(res map[string]any) {
				for id, r := range res {
					if props, _ := r.(map[string]any)["Properties"].(map[string]any); props["RouteKey"] == "$default" {
						delete(res, id)
					}
				}
			}), lambdaDir)
		}, []string{"routes.$default"}},
		{"deployed code's prefix removed from template.yaml", func(t *testing.T) (stackModel, stackModel) {
			return samModel(t, mutatedSAM(t, "Resources", "DispatcherFunction", "Properties", "Environment", "Variables", "PLATFORM_CODE_PREFIX")), cdk
		}, []string{"functions.DispatcherFunction.env.PLATFORM_CODE_PREFIX"}},
		{"boundary condition removed from the CDK template", func(t *testing.T) (stackModel, stackModel) {
			return sam, cdkModel(t, mutatedCDK(t, cdkJSON, func(res map[string]any) {
				for _, p := range res["AdminFunctionRole"].(map[string]any)["Properties"].(map[string]any)["Policies"].([]any) {
					if p.(map[string]any)["PolicyName"] != "deployed-code" {
						continue
					}
					for _, st := range p.(map[string]any)["PolicyDocument"].(map[string]any)["Statement"].([]any) {
						if fmt.Sprint(st.(map[string]any)["Action"]) == "[iam:CreateRole iam:PutRolePolicy]" {
							delete(st.(map[string]any), "Condition")
						}
					}
				}
			}), lambdaDir)
		}, []string{"roles.AdminFunctionRole.statements"}},
		{"boundary widened in the CDK template", func(t *testing.T) (stackModel, stackModel) {
			return sam, cdkModel(t, mutatedCDK(t, cdkJSON, func(res map[string]any) {
				doc := res["CodeBoundary"].(map[string]any)["Properties"].(map[string]any)["PolicyDocument"].(map[string]any)
				doc["Statement"] = append(doc["Statement"].([]any), map[string]any{"Effect": "Allow", "Action": "dynamodb:GetItem", "Resource": "*"})
			}), lambdaDir)
		}, []string{"managedPolicies.CodeBoundary"}},
		{"stream function's condition removed from template.yaml", func(t *testing.T) (stackModel, stackModel) {
			return samModel(t, mutatedSAM(t, "Resources", "ChatStreamFunction", "Condition")), cdk
		}, []string{"conditions.ChatStreamFunction", "conditions.ChatStreamFunctionUrl", "conditions.ChatStreamFunctionUrlPublicPermissions"}},
		{"stream function URL's condition removed from the CDK template", func(t *testing.T) (stackModel, stackModel) {
			return sam, cdkModel(t, mutatedCDK(t, cdkJSON, func(res map[string]any) {
				delete(res["ChatStreamFunctionUrl"].(map[string]any), "Condition")
			}), lambdaDir)
		}, []string{"conditions.ChatStreamFunctionUrl"}},
		{"the NLB's proxy protocol removed from the CDK template", func(t *testing.T) (stackModel, stackModel) {
			return sam, cdkModel(t, mutatedCDK(t, cdkJSON, func(res map[string]any) {
				props := res["StreamTargetGroup"].(map[string]any)["Properties"].(map[string]any)
				props["TargetGroupAttributes"] = props["TargetGroupAttributes"].([]any)[:1]
			}), lambdaDir)
		}, []string{"streamTier.StreamTargetGroup"}},
		{"the NLB's TLS listener removed from template.yaml", func(t *testing.T) (stackModel, stackModel) {
			return samModel(t, mutatedSAM(t, "Resources", "StreamTlsPassListener")), cdk
		}, []string{"streamTier.StreamTlsPassListener"}},
		{"the tasks' certificate grant removed from the CDK template", func(t *testing.T) (stackModel, stackModel) {
			return sam, cdkModel(t, mutatedCDK(t, cdkJSON, func(res map[string]any) {
				props := res["StreamTaskRole"].(map[string]any)["Properties"].(map[string]any)
				var kept []any
				for _, p := range props["Policies"].([]any) {
					if p.(map[string]any)["PolicyName"] != "stream-tls" {
						kept = append(kept, p)
					}
				}
				props["Policies"] = kept
			}), lambdaDir)
		}, []string{"roles.StreamTaskRole.statements"}},
		{"failure destination removed from template.yaml", func(t *testing.T) (stackModel, stackModel) {
			return samModel(t, mutatedSAM(t, "Resources", "DispatcherFunction", "Properties", "Events", "Outbox", "Properties", "DestinationConfig")), cdk
		}, []string{"streamSources.DispatcherFunction <- ${Table.StreamArn}.onFailure"}},
		{"record age changed in the CDK template", func(t *testing.T) (stackModel, stackModel) {
			return sam, cdkModel(t, mutatedCDK(t, cdkJSON, func(res map[string]any) {
				res["ChatFanoutFunctionSignals"].(map[string]any)["Properties"].(map[string]any)["MaximumRecordAgeInSeconds"] = 60
			}), lambdaDir)
		}, []string{"streamSources.ChatFanoutFunction <- ${Table.StreamArn}.maximumRecordAgeInSeconds"}},
		{"failure queue's retention changed in the CDK template", func(t *testing.T) (stackModel, stackModel) {
			return sam, cdkModel(t, mutatedCDK(t, cdkJSON, func(res map[string]any) {
				res["DispatcherFailureQueue"].(map[string]any)["Properties"].(map[string]any)["MessageRetentionPeriod"] = 60
			}), lambdaDir)
		}, []string{"operations.DispatcherFailureQueue"}},
		{"API throttling removed from template.yaml", func(t *testing.T) (stackModel, stackModel) {
			return samModel(t, mutatedSAM(t, "Resources", "HttpApi", "Properties", "DefaultRouteSettings")), cdk
		}, []string{"apiThrottle"}},
		{"domain mapping's dependency on the stage removed from the CDK template", func(t *testing.T) (stackModel, stackModel) {
			return sam, cdkModel(t, mutatedCDK(t, cdkJSON, func(res map[string]any) {
				delete(res["ApiDomainMapping"].(map[string]any), "DependsOn")
			}), lambdaDir)
		}, []string{"operations.ApiDomainMapping"}},
		{"alarm removed from template.yaml", func(t *testing.T) (stackModel, stackModel) {
			return samModel(t, mutatedSAM(t, "Resources", "OutboxAgeAlarm")), cdk
		}, []string{"operations.OutboxAgeAlarm"}},
		{"alarm threshold changed in the CDK template", func(t *testing.T) (stackModel, stackModel) {
			return sam, cdkModel(t, mutatedCDK(t, cdkJSON, func(res map[string]any) {
				res["Api5xxAlarm"].(map[string]any)["Properties"].(map[string]any)["Threshold"] = 50
			}), lambdaDir)
		}, []string{"operations.Api5xxAlarm"}},
		{"email subscription's condition removed from the CDK template", func(t *testing.T) (stackModel, stackModel) {
			return sam, cdkModel(t, mutatedCDK(t, cdkJSON, func(res map[string]any) {
				delete(res["AlarmEmailSubscription"].(map[string]any), "Condition")
			}), lambdaDir)
		}, []string{"operations.AlarmEmailSubscription"}},
		{"bucket notification removed from the CDK template", func(t *testing.T) (stackModel, stackModel) {
			return sam, cdkModel(t, mutatedCDK(t, cdkJSON, func(res map[string]any) {
				delete(res["FilesBucket"].(map[string]any)["Properties"].(map[string]any), "NotificationConfiguration")
			}), lambdaDir)
		}, []string{"buckets.FilesBucket.notifications.s3:ObjectCreated:* if key prefix=files/"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := tc.mutate(t)
			d := strings.Join(differences(a, b), "\n")
			if d == "" {
				t.Fatal("the agreement check found no difference")
			}
			for _, w := range tc.want {
				if !strings.Contains(d, w) {
					t.Errorf("differences do not name %s:\n%s", w, d)
				}
			}
		})
	}
}

// deleteOfType deletes every resource of type typ.
func deleteOfType(resources map[string]any, typ string) {
	for id, r := range resources {
		if r.(map[string]any)["Type"] == typ {
			delete(resources, id)
		}
	}
}

// mutatedSAM writes a copy of template.yaml without the node at path (a
// sequence of mapping keys) and returns the copy's path.
func mutatedSAM(t *testing.T, path ...string) string {
	t.Helper()
	raw, err := os.ReadFile(samTemplate)
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	n := doc.Content[0]
	for i, key := range path {
		found := false
		for j := 0; j+1 < len(n.Content); j += 2 {
			if n.Content[j].Value == key {
				if i == len(path)-1 {
					n.Content = append(n.Content[:j], n.Content[j+2:]...)
				} else {
					n = n.Content[j+1]
				}
				found = true
				break
			}
		}
		if !found {
			t.Fatalf("template.yaml has no %s", strings.Join(path[:i+1], "."))
		}
	}
	out, err := yaml.Marshal(&doc)
	if err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(t.TempDir(), "template.yaml")
	if err := os.WriteFile(copyPath, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return copyPath
}

// mutatedCDK returns a copy of the synthesized template changed by mutate
// (which gets the Resources map).
func mutatedCDK(t *testing.T, template []byte, mutate func(resources map[string]any)) []byte {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(template, &doc); err != nil {
		t.Fatal(err)
	}
	mutate(doc["Resources"].(map[string]any))
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestEnvironmentCoversRuntime: every variable shared/runtime reads is set
// on at least one function of the stack, except the *_ENDPOINT variables
// that point the code at stand-ins of AWS services (never set in AWS) and
// PLATFORM_DELIVERY_ALLOW_PRIVATE (set by the AWS-shaped local stack only:
// never in AWS) and PLATFORM_LOCAL_DYNAMO_HTTP (the local platform's
// embedded DynamoDB's client: there is none in AWS), and every variable
// the stack sets is one the code reads.
func TestEnvironmentCoversRuntime(t *testing.T) {
	src, err := filepath.Glob("../shared/runtime/*.go")
	if err != nil || len(src) == 0 {
		t.Fatalf("shared/runtime: %v", err)
	}
	read := map[string]bool{}
	name := regexp.MustCompile(`(?:Getenv|get)\("([A-Z][A-Z0-9_]*)"|Env[A-Za-z]* = "([A-Z][A-Z0-9_]*)"`)
	for _, f := range src {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range name.FindAllStringSubmatch(string(b), -1) {
			read[m[1]+m[2]] = true
		}
	}
	// Variables read outside shared/runtime by the code it runs: the stack
	// may set them (the console's dashboard link, docs/metrics.md; the
	// stream tasks' edge behind the NLB, functions/chatstream-service;
	// where the spans go).
	readElsewhere := map[string]bool{}
	for _, f := range []string{"../shared/httpapi/metrics.go", "../shared/streamedge/streamedge.go", "../shared/tracing/xray.go"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range name.FindAllStringSubmatch(string(b), -1) {
			readElsewhere[m[1]+m[2]] = true
		}
	}
	set := map[string]bool{}
	m := samModel(t, samTemplate)
	for _, f := range m.Functions {
		for k := range f.Env {
			set[k] = true
		}
	}
	// The container stream tier's task (functions/chatstream-service).
	var task struct {
		Properties struct {
			ContainerDefinitions []struct{ Environment []struct{ Name string } }
		}
	}
	if err := json.Unmarshal([]byte(m.StreamTier["StreamTaskDefinition"]), &task); err != nil || len(task.Properties.ContainerDefinitions) != 1 {
		t.Fatalf("StreamTaskDefinition: %v", err)
	}
	for _, e := range task.Properties.ContainerDefinitions[0].Environment {
		set[e.Name] = true
	}
	for v := range read {
		// PLATFORM_BUILTINS: unset in the stack (every built-in integration).
		// AWS_LAMBDA_*: set by Lambda itself in every execution environment.
		if !set[v] && !strings.HasSuffix(v, "_ENDPOINT") && !strings.HasPrefix(v, "AWS_LAMBDA_") && v != "PLATFORM_DELIVERY_ALLOW_PRIVATE" && v != "PLATFORM_BUILTINS" && v != "PLATFORM_LOCAL_DYNAMO_HTTP" {
			t.Errorf("shared/runtime reads %s, which no function of the stack sets", v)
		}
	}
	for v := range set {
		if !read[v] && !readElsewhere[v] {
			t.Errorf("the stack sets %s, which shared/runtime does not read", v)
		}
	}
	if len(read) < 5 {
		t.Fatalf("found only %v in shared/runtime: is the pattern still right?", read)
	}
}

// TestSampleEventsMatchRoutes: each API sample event of events/ carries a
// route of its function, so `sam local invoke <Area>Function -e` sends what
// API Gateway would.
func TestSampleEventsMatchRoutes(t *testing.T) {
	m := samModel(t, samTemplate)
	for _, f := range Functions {
		if len(f.Routes) == 0 {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("..", "events", f.Dir+"-request.json"))
		if err != nil {
			t.Fatal(err)
		}
		var ev struct {
			RouteKey       string `json:"routeKey"`
			RawPath        string `json:"rawPath"`
			RequestContext struct {
				RouteKey string `json:"routeKey"`
				HTTP     struct {
					Method, Path string
				} `json:"http"`
			} `json:"requestContext"`
		}
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatalf("%s-request.json: %v", f.Dir, err)
		}
		r, ok := m.Routes[ev.RouteKey]
		if !ok || r.Function != f.ID+"Function" || ev.RequestContext.RouteKey != ev.RouteKey {
			t.Errorf("%s-request.json: route key %q is not a route of %sFunction", f.Dir, ev.RouteKey, f.ID)
			continue
		}
		pattern := strings.TrimPrefix(ev.RouteKey, "ANY ")
		prefix, greedy := strings.CutSuffix(pattern, "{proxy+}")
		if match := ev.RawPath == pattern || (greedy && strings.HasPrefix(ev.RawPath, prefix) && len(ev.RawPath) > len(prefix)); !match ||
			ev.RequestContext.HTTP.Path != ev.RawPath {
			t.Errorf("%s-request.json: path %q does not match its route %q", f.Dir, ev.RawPath, ev.RouteKey)
		}
	}
}
