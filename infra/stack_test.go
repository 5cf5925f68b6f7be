package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

// stackTemplate is the synthesized stack for the CDK assertions.
func stackTemplate(t *testing.T) assertions.Template {
	t.Helper()
	raw, _ := synthesized(t)
	return assertions.Template_FromString(jsii.String(string(raw)), nil)
}

// check runs one CDK assertion; a failed assertion (a panic from the jsii
// runtime) fails the test with its message.
func check(t *testing.T, what string, assertion func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s: %v", what, r)
		}
	}()
	assertion()
}

type obj = map[string]any

func like(m obj) assertions.Matcher { return assertions.Match_ObjectLike(&m) }
func arrayWith(items ...any) assertions.Matcher {
	return assertions.Match_ArrayWith(&items)
}

func TestStackResources(t *testing.T) {
	tmpl := stackTemplate(t)
	for typ, n := range map[string]float64{
		"AWS::Lambda::Function":           7, // no custom-resource functions
		"AWS::ApiGatewayV2::Api":          1,
		"AWS::ApiGatewayV2::Stage":        1,
		"AWS::ApiGatewayV2::Route":        11, // 7, the cognitive API, the console's 2 and the catch-all $default
		"AWS::ApiGatewayV2::Integration":  4,
		"AWS::DynamoDB::Table":            1,
		"AWS::S3::Bucket":                 1,
		"AWS::S3::BucketPolicy":           1,
		"AWS::Scheduler::ScheduleGroup":   1,
		"AWS::Scheduler::Schedule":        0, // created at run time by the admin function
		"AWS::Logs::LogGroup":             9,
		"AWS::IAM::Role":                  8,
		"AWS::IAM::Policy":                0, // inline policies only
		"AWS::IAM::ManagedPolicy":         1, // the boundary of deployed code's roles, attached to none
		"AWS::Lambda::EventSourceMapping": 1, // the dispatcher's stream trigger
		"AWS::Events::Rule":               1, // the dispatcher's one-minute schedule
	} {
		check(t, typ, func() { tmpl.ResourceCountIs(jsii.String(typ), jsii.Number(n)) })
	}

	check(t, "functions", func() {
		tmpl.AllResourcesProperties(jsii.String("AWS::Lambda::Function"), like(obj{
			"Runtime": "provided.al2023", "Architectures": []any{"arm64"}, "Handler": "bootstrap",
			"Environment": like(obj{"Variables": like(obj{"PLATFORM_TABLE": obj{"Ref": "Table"}})}),
		}))
	})
	for _, f := range Functions {
		check(t, f.ID+" function", func() {
			tmpl.HasResource(jsii.String("AWS::Lambda::Function"), like(obj{
				"Properties": like(obj{
					"FunctionName": obj{"Fn::Sub": "${AWS::StackName}-" + f.Dir},
					"Role":         obj{"Fn::GetAtt": []any{f.ID + "FunctionRole", "Arn"}},
					"Timeout":      f.Timeout,
					"MemorySize":   f.MemorySize,
				}),
				"DependsOn": arrayWith(f.ID + "LogGroup"),
			}))
		})
		check(t, f.ID+" log group", func() {
			tmpl.HasResourceProperties(jsii.String("AWS::Logs::LogGroup"), obj{
				"LogGroupName": obj{"Fn::Sub": "/aws/lambda/${AWS::StackName}-" + f.Dir}, "RetentionInDays": obj{"Ref": "LogRetentionDays"},
			})
		})
	}
	for _, name := range []string{"bots", "integrations"} {
		check(t, name+" log group", func() {
			tmpl.HasResourceProperties(jsii.String("AWS::Logs::LogGroup"), obj{
				"LogGroupName": obj{"Fn::Sub": "/platform/${AWS::StackName}/" + name}, "RetentionInDays": obj{"Ref": "LogRetentionDays"},
			})
		})
	}

	check(t, "API stage", func() {
		tmpl.HasResourceProperties(jsii.String("AWS::ApiGatewayV2::Stage"), obj{"StageName": "$default", "AutoDeploy": true})
	})
	for _, rk := range []string{"/v1/admin/{proxy+}", "/v1/chat/{proxy+}", "/webhooks/{proxy+}", "/v1/tables/{proxy+}", "/v1/tables", "/v1/files/{proxy+}", "/v1/files", "/", "/console/{proxy+}"} {
		check(t, "route "+rk, func() {
			tmpl.HasResourceProperties(jsii.String("AWS::ApiGatewayV2::Route"), like(obj{"RouteKey": "ANY " + rk}))
		})
	}
	check(t, "catch-all route", func() {
		tmpl.HasResourceProperties(jsii.String("AWS::ApiGatewayV2::Route"), like(obj{"RouteKey": "$default"}))
	})
	check(t, "integrations", func() {
		tmpl.AllResourcesProperties(jsii.String("AWS::ApiGatewayV2::Integration"), like(obj{"IntegrationType": "AWS_PROXY", "PayloadFormatVersion": "2.0"}))
	})

	check(t, "table", func() {
		key := func(name, typ string) obj { return obj{"AttributeName": name, "KeyType": typ} }
		tmpl.HasResource(jsii.String("AWS::DynamoDB::Table"), obj{
			"DeletionPolicy": "Retain", "UpdateReplacePolicy": "Retain",
			"Properties": like(obj{
				"BillingMode": "PAY_PER_REQUEST",
				"KeySchema":   []any{key("pk", "HASH"), key("sk", "RANGE")},
				"GlobalSecondaryIndexes": []any{
					obj{"IndexName": "gsi1", "KeySchema": []any{key("gsi1pk", "HASH"), key("gsi1sk", "RANGE")}, "Projection": obj{"ProjectionType": "ALL"}},
					obj{"IndexName": "gsi2", "KeySchema": []any{key("gsi2pk", "HASH"), key("gsi2sk", "RANGE")}, "Projection": obj{"ProjectionType": "ALL"}},
				},
				"TimeToLiveSpecification":          obj{"AttributeName": "ttl", "Enabled": true},
				"PointInTimeRecoverySpecification": obj{"PointInTimeRecoveryEnabled": true},
				"DeletionProtectionEnabled":        true,
			}),
		})
	})

	check(t, "bucket", func() {
		tmpl.HasResource(jsii.String("AWS::S3::Bucket"), obj{
			"DeletionPolicy": "Retain", "UpdateReplacePolicy": "Retain",
			"DependsOn": []any{"UploadCompletionFunctionUploadedPermission"},
			"Properties": like(obj{
				"BucketEncryption":               obj{"ServerSideEncryptionConfiguration": []any{obj{"ServerSideEncryptionByDefault": obj{"SSEAlgorithm": "AES256"}}}},
				"PublicAccessBlockConfiguration": obj{"BlockPublicAcls": true, "BlockPublicPolicy": true, "IgnorePublicAcls": true, "RestrictPublicBuckets": true},
				"OwnershipControls":              obj{"Rules": []any{obj{"ObjectOwnership": "BucketOwnerEnforced"}}},
				"CorsConfiguration":              obj{"CorsRules": []any{like(obj{"AllowedMethods": arrayWith("PUT"), "AllowedOrigins": []any{"*"}})}},
				"NotificationConfiguration": obj{"LambdaConfigurations": []any{
					obj{"Event": "s3:ObjectCreated:*", "Function": obj{"Fn::GetAtt": []any{"UploadCompletionFunction", "Arn"}},
						"Filter": obj{"S3Key": obj{"Rules": []any{obj{"Name": "prefix", "Value": "files/"}}}}},
				}},
			}),
		})
	})
	check(t, "bucket notification permission", func() {
		tmpl.HasResourceProperties(jsii.String("AWS::Lambda::Permission"), obj{
			"Action": "lambda:InvokeFunction", "Principal": "s3.amazonaws.com",
			"FunctionName": obj{"Ref": "UploadCompletionFunction"}, "SourceAccount": obj{"Ref": "AWS::AccountId"},
		})
	})
	check(t, "TLS only", func() {
		tmpl.HasResourceProperties(jsii.String("AWS::S3::BucketPolicy"), like(obj{
			"PolicyDocument": like(obj{"Statement": arrayWith(like(obj{
				"Effect": "Deny", "Action": "s3:*", "Condition": obj{"Bool": obj{"aws:SecureTransport": "false"}},
			}))}),
		}))
	})

	check(t, "scheduler role", func() {
		tmpl.HasResourceProperties(jsii.String("AWS::IAM::Role"), like(obj{
			"AssumeRolePolicyDocument": like(obj{"Statement": []any{like(obj{
				"Principal": obj{"Service": "scheduler.amazonaws.com"},
				"Condition": obj{"StringEquals": obj{"aws:SourceAccount": obj{"Ref": "AWS::AccountId"}}},
			})}}),
			"Policies": []any{like(obj{"PolicyDocument": like(obj{"Statement": []any{obj{
				"Effect": "Allow", "Action": "lambda:InvokeFunction", "Resource": obj{"Fn::GetAtt": []any{"SchedulerFunction", "Arn"}},
			}}})})},
		}))
	})

	// runtime.DispatchReserve (2 min 30 s): a dispatcher invocation starts
	// a pass only with that much left, so its timeout must leave room for
	// passes beyond it.
	for _, f := range Functions {
		if f.ID == "Dispatcher" && f.Timeout < 150+60 {
			t.Errorf("the dispatcher's timeout %v s leaves less than a minute beyond its 150 s reserve", f.Timeout)
		}
	}
	check(t, "dispatcher stream trigger", func() {
		tmpl.HasResourceProperties(jsii.String("AWS::Lambda::EventSourceMapping"), obj{
			"FunctionName": obj{"Ref": "DispatcherFunction"}, "EventSourceArn": obj{"Fn::GetAtt": []any{"Table", "StreamArn"}},
			"StartingPosition": "LATEST", "BatchSize": 100, "MaximumBatchingWindowInSeconds": 0, "MaximumRetryAttempts": 2,
			"FilterCriteria": obj{"Filters": []any{obj{"Pattern": `{"eventName":["INSERT"],"dynamodb":{"Keys":{"pk":{"S":["OUTBOX"]}}}}`}}},
		})
	})
	// Logical ids as SAM makes them of DispatcherFunction's events.
	if raw, _ := synthesized(t); !strings.Contains(string(raw), `"DispatcherFunctionOutbox":`) ||
		!strings.Contains(string(raw), `"DispatcherFunctionRetries":`) || !strings.Contains(string(raw), `"DispatcherFunctionRetriesPermission":`) {
		t.Error("the dispatcher's triggers do not have SAM's logical ids (DispatcherFunctionOutbox, DispatcherFunctionRetries, DispatcherFunctionRetriesPermission)")
	}
	check(t, "dispatcher schedule", func() {
		tmpl.HasResourceProperties(jsii.String("AWS::Events::Rule"), like(obj{
			"ScheduleExpression": "rate(1 minute)", "State": "ENABLED",
			"Targets": []any{like(obj{"Arn": obj{"Fn::GetAtt": []any{"DispatcherFunction", "Arn"}}})},
		}))
		tmpl.HasResourceProperties(jsii.String("AWS::Lambda::Permission"), obj{
			"Action": "lambda:InvokeFunction", "Principal": "events.amazonaws.com",
			"FunctionName": obj{"Fn::GetAtt": []any{"DispatcherFunction", "Arn"}}, "SourceArn": obj{"Fn::GetAtt": []any{"DispatcherFunctionRetries", "Arn"}},
		})
	})

	check(t, "paging key", func() {
		tmpl.HasParameter(jsii.String("PagingKey"), like(obj{"Type": "String", "NoEcho": true, "MinLength": 32}))
	})
	check(t, "API URL", func() {
		tmpl.HasOutput(jsii.String("ApiUrl"), like(obj{"Value": obj{"Fn::GetAtt": []any{"HttpApi", "ApiEndpoint"}}}))
	})
}

// TestLeastPrivilege checks, in both descriptions of the stack, what each
// role may do.
func TestLeastPrivilege(t *testing.T) {
	cdkJSON, lambdaDir := synthesized(t)
	for name, m := range map[string]stackModel{
		"template.yaml": samModel(t, samTemplate),
		"CDK":           cdkModel(t, cdkJSON, lambdaDir),
	} {
		t.Run(name, func(t *testing.T) { checkLeastPrivilege(t, m) })
	}
}

func checkLeastPrivilege(t *testing.T, m stackModel) {
	// Which roles may use which services (beyond the table and logs).
	onlyFor := map[string][]string{
		"s3:":                   {"FilesFunctionRole", "TablesFunctionRole", "UploadCompletionFunctionRole", "AdminFunctionRole"},
		"scheduler:":            {"AdminFunctionRole", "SchedulerFunctionRole"},
		"iam:":                  {"AdminFunctionRole"},
		"logs:startquery":       {"AdminFunctionRole"},
		"logs:getqueryresults":  {"AdminFunctionRole"},
		"logs:stopquery":        {"AdminFunctionRole"},
		"lambda:invokefunction": {"SchedulerRole", "AdminFunctionRole", "ChatFunctionRole", "SchedulerFunctionRole", "DispatcherFunctionRole"},
		"lambda:":               {"SchedulerRole", "AdminFunctionRole", "ChatFunctionRole", "SchedulerFunctionRole", "DispatcherFunctionRole"},
		// The table's stream: what the dispatcher's event source mapping reads.
		"dynamodb:describestream":   {"DispatcherFunctionRole"},
		"dynamodb:getrecords":       {"DispatcherFunctionRole"},
		"dynamodb:getsharditerator": {"DispatcherFunctionRole"},
		"dynamodb:liststreams":      {"DispatcherFunctionRole"},
	}
	roleOfFunction := map[string]string{}
	for id, f := range m.Functions {
		if other, dup := roleOfFunction[f.Role]; dup {
			t.Errorf("%s and %s share role %s", id, other, f.Role)
		}
		roleOfFunction[f.Role] = id
	}
	for roleID, r := range m.Roles {
		fn := roleOfFunction[roleID]
		for _, st := range r.Statements {
			// "Allow action on resource[ if condition]"
			fields := strings.Fields(st)
			effect, action, resource := fields[0], fields[1], fields[3]
			if effect != "Allow" {
				continue
			}
			if action == "*" || strings.HasSuffix(action, ":*") {
				t.Errorf("%s: wildcard action: %s", roleID, st)
			}
			if resource == "*" && action != "logs:getqueryresults" && action != "logs:stopquery" && action != "dynamodb:liststreams" {
				t.Errorf("%s: any resource (only the Logs Insights query calls and ListStreams, which have no resource-level permissions, may): %s", roleID, st)
			}
			if strings.HasPrefix(action, "dynamodb:") {
				switch strings.TrimPrefix(action, "dynamodb:") {
				case "getitem", "batchgetitem", "query", "putitem", "updateitem", "deleteitem", "batchwriteitem", "conditioncheckitem":
					if resource != "${Table.Arn}" && resource != "${Table.Arn}/index/*" {
						t.Errorf("%s: DynamoDB access beyond the table: %s", roleID, st)
					}
				case "describestream", "getrecords", "getsharditerator":
					if resource != "${Table.StreamArn}" {
						t.Errorf("%s: stream access beyond the table's stream: %s", roleID, st)
					}
				case "liststreams":
				default:
					t.Errorf("%s: DynamoDB action beyond item access and the stream's reads (no Scan, no table management): %s", roleID, st)
				}
			}
			for prefix, allowed := range onlyFor {
				if strings.HasPrefix(action, prefix) && !containsString(allowed, roleID) {
					t.Errorf("%s may not use %s: %s", roleID, prefix, st)
				}
			}
			codeRoles := "arn:${AWS::Partition}:iam::${AWS::AccountId}:role/${AWS::StackName}-code/*"
			codeFunctions := "arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:function:${AWS::StackName}-code-*"
			if action == "iam:passrole" && !(resource == "${SchedulerRole.Arn}" && strings.Contains(st, `"iam:PassedToService":"scheduler.amazonaws.com"`)) &&
				!(resource == codeRoles && strings.Contains(st, `"iam:PassedToService":"lambda.amazonaws.com"`)) {
				t.Errorf("%s: PassRole beyond SchedulerRole to EventBridge Scheduler and deployed code's roles to Lambda: %s", roleID, st)
			}
			// Deployed code's roles: only under their path, created or
			// given a policy only with the boundary.
			if strings.HasPrefix(action, "iam:") && action != "iam:passrole" {
				if resource != codeRoles {
					t.Errorf("%s: IAM beyond deployed code's roles: %s", roleID, st)
				}
				switch action {
				case "iam:createrole", "iam:putrolepolicy":
					if !strings.Contains(st, `"iam:PermissionsBoundary":"${CodeBoundary}"`) {
						t.Errorf("%s: a role made or changed without the boundary: %s", roleID, st)
					}
				case "iam:getrole", "iam:deleterolepolicy", "iam:deleterole":
				default:
					t.Errorf("%s: IAM action beyond making, reading and deleting deployed code's roles: %s", roleID, st)
				}
			}
			// Lambda: only deployed code's functions (SchedulerRole: the
			// scheduler function); only the admin function manages them.
			if strings.HasPrefix(action, "lambda:") {
				if roleID == "SchedulerRole" {
					if resource != "${SchedulerFunction.Arn}" {
						t.Errorf("%s: %s", roleID, st)
					}
				} else if resource != codeFunctions || (action != "lambda:invokefunction" && roleID != "AdminFunctionRole") {
					t.Errorf("%s: Lambda beyond invoking deployed code's functions: %s", roleID, st)
				}
			}
			// The admin function keeps deployed code, icons and readmes:
			// the bucket's code/ keys, never the files of bots.
			if roleID == "AdminFunctionRole" && strings.HasPrefix(action, "s3:") &&
				!(resource == "${FilesBucket.Arn}/code/*" && (action == "s3:getobject" || action == "s3:putobject" || action == "s3:deleteobject")) &&
				!(resource == "${FilesBucket.Arn}" && action == "s3:listbucket") {
				t.Errorf("%s: bucket access beyond code/ keys: %s", roleID, st)
			}
			if strings.HasPrefix(action, "logs:") && fn != "" && resource != "*" {
				own := "${" + strings.TrimSuffix(fn, "Function") + "LogGroup.Arn}"
				platform := resource == "${BotLogGroup.Arn}" || resource == "${IntegrationLogGroup.Arn}"
				if resource != own && !platform {
					t.Errorf("%s: logs beyond its own log group and the bot/integration groups: %s", roleID, st)
				}
			}
		}
	}
	// The chat function cannot touch the bucket, in its role or by name.
	if chat, ok := m.Roles["ChatFunctionRole"]; !ok {
		t.Error("no ChatFunctionRole")
	} else {
		for _, st := range chat.Statements {
			if strings.Contains(st, "s3:") || strings.Contains(st, "FilesBucket") || strings.Contains(st, "platform-files-") {
				t.Errorf("ChatFunctionRole touches the bucket: %s", st)
			}
		}
	}
	if _, ok := m.Functions["ChatFunction"].Env["PLATFORM_BUCKET"]; ok {
		t.Error("the chat function is told the bucket's name")
	}
	// Only the API functions hold the paging key.
	for id, f := range m.Functions {
		_, has := f.Env["PLATFORM_PAGING_KEY"]
		api := f.InvokedBy != nil && containsString(f.InvokedBy, "apigateway.amazonaws.com")
		if has != api {
			t.Errorf("%s: holds the paging key: %v, is an API function: %v", id, has, api)
		}
	}
	for _, st := range m.Roles["SchedulerFunctionRole"].Statements {
		if strings.HasPrefix(st, "Allow scheduler:") && !strings.HasPrefix(st, "Allow scheduler:deleteschedule ") {
			t.Errorf("the scheduler function may only delete schedules: %s", st)
		}
	}
	// The dispatcher: its log group, the bot and integration log groups,
	// item access without batch writes, the stream's reads; nothing more.
	var want []string
	for _, a := range []string{"getitem", "batchgetitem", "query", "putitem", "updateitem", "deleteitem", "conditioncheckitem"} {
		want = append(want, "Allow dynamodb:"+a+" on ${Table.Arn}", "Allow dynamodb:"+a+" on ${Table.Arn}/index/*")
	}
	for _, a := range []string{"describestream", "getrecords", "getsharditerator"} {
		want = append(want, "Allow dynamodb:"+a+" on ${Table.StreamArn}")
	}
	want = append(want, "Allow dynamodb:liststreams on *",
		"Allow lambda:invokefunction on arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:function:${AWS::StackName}-code-*")
	for _, g := range []string{"DispatcherLogGroup", "BotLogGroup", "IntegrationLogGroup"} {
		want = append(want, "Allow logs:createlogstream on ${"+g+".Arn}", "Allow logs:putlogevents on ${"+g+".Arn}")
	}
	if got := m.Roles["DispatcherFunctionRole"].Statements; fmt.Sprint(got) != fmt.Sprint(uniq(want)) {
		t.Errorf("DispatcherFunctionRole:\n got  %v\n want %v", got, uniq(want))
	}
	// The boundary of deployed code's roles: their own log streams at most.
	if b := m.ManagedPolicies["CodeBoundary"]; fmt.Sprint(b) != "[Allow logs:createlogstream on ${BotLogGroup.Arn} Allow logs:createlogstream on ${IntegrationLogGroup.Arn} Allow logs:putlogevents on ${BotLogGroup.Arn} Allow logs:putlogevents on ${IntegrationLogGroup.Arn}]" {
		t.Errorf("CodeBoundary allows more than writing the bot and integration log groups: %v", b)
	}
	if s := m.Roles["SchedulerRole"]; fmt.Sprint(s.Statements) != "[Allow lambda:invokefunction on ${SchedulerFunction.Arn}]" {
		t.Errorf("SchedulerRole may do more than invoke the scheduler function: %v", s.Statements)
	}
}

func containsString(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}
