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
		"AWS::Lambda::Function":           11, // no CDK custom-resource functions (CodeTeardown's is the stack's own)
		"AWS::ApiGatewayV2::Api":          1,
		"AWS::ApiGatewayV2::Stage":        1,
		"AWS::ApiGatewayV2::Route":        12, // 7, the cognitive API, the console's 2, sign-in's /auth and the catch-all $default
		"AWS::ApiGatewayV2::Integration":  4,
		"AWS::DynamoDB::Table":            1,
		"AWS::S3::Bucket":                 1,
		"AWS::S3::BucketPolicy":           1,
		"AWS::Scheduler::ScheduleGroup":   1,
		"AWS::Scheduler::Schedule":        0,  // created at run time by the admin function
		"AWS::Logs::LogGroup":             14, // the functions', bots', integrations', the stream tier's tasks'
		"AWS::IAM::Role":                  14, // the stream tier's task and execution roles among them
		"AWS::IAM::Policy":                0,  // inline policies only
		"AWS::IAM::ManagedPolicy":         1,  // the boundary of deployed code's roles, attached to none
		"AWS::Lambda::EventSourceMapping": 2,  // the dispatcher's and the chat fan-out's stream triggers
		"AWS::Lambda::Url":                1,  // the Chat API's streams
		"AWS::Events::Rule":               2,  // the dispatcher's one-minute schedule, the sweeper's five-minute one
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
	for _, rk := range []string{"/v1/admin/{proxy+}", "/v1/chat/{proxy+}", "/webhooks/{proxy+}", "/v1/tables/{proxy+}", "/v1/tables", "/v1/files/{proxy+}", "/v1/files", "/", "/console/{proxy+}", "/auth/{proxy+}"} {
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
				// TableCapacityMode: on demand unless provisioned (tablecapacity.go).
				"BillingMode": obj{"Fn::If": []any{"TableProvisioned", "PROVISIONED", "PAY_PER_REQUEST"}},
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
			"StartingPosition": "TRIM_HORIZON", "BatchSize": 100, "MaximumBatchingWindowInSeconds": 0, "MaximumRetryAttempts": -1,
			"MaximumRecordAgeInSeconds": -1,
			"ParallelizationFactor":     10,
			"FilterCriteria":            obj{"Filters": []any{obj{"Pattern": `{"eventName":["INSERT"],"dynamodb":{"Keys":{"pk":{"S":[{"prefix":"OUTBOX#"}]}}}}`}}},
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
		tmpl.HasOutput(jsii.String("ApiUrl"), like(obj{"Value": obj{"Fn::If": []any{"HasDomain", obj{"Fn::Sub": "https://${DomainName}"}, obj{"Fn::GetAtt": []any{"HttpApi", "ApiEndpoint"}}}}}))
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
		"s3:":                   {"FilesFunctionRole", "TablesFunctionRole", "UploadCompletionFunctionRole", "AdminFunctionRole", "SweeperFunctionRole", "ChatFunctionRole", "ChatStreamFunctionRole", "StreamTaskRole"},
		"scheduler:":            {"AdminFunctionRole", "SchedulerFunctionRole"},
		"iam:":                  {"AdminFunctionRole", "TeardownFunctionRole"},
		"logs:startquery":       {"AdminFunctionRole"},
		"logs:getqueryresults":  {"AdminFunctionRole"},
		"logs:stopquery":        {"AdminFunctionRole"},
		"lambda:invokefunction": {"SchedulerRole", "AdminFunctionRole", "ChatFunctionRole", "ChatStreamFunctionRole", "StreamTaskRole", "SchedulerFunctionRole", "DispatcherFunctionRole"},
		"lambda:":               {"SchedulerRole", "AdminFunctionRole", "ChatFunctionRole", "ChatStreamFunctionRole", "StreamTaskRole", "SchedulerFunctionRole", "DispatcherFunctionRole", "TeardownFunctionRole"},
		// Pulling the stream tier's image: its execution role only.
		"ecr:": {"StreamExecutionRole"},
		// The table's stream: what the event source mappings read (the
		// dispatcher's outbox, the chat fan-out's signals).
		"dynamodb:describestream":   {"DispatcherFunctionRole", "ChatFanoutFunctionRole"},
		"dynamodb:getrecords":       {"DispatcherFunctionRole", "ChatFanoutFunctionRole"},
		"dynamodb:getsharditerator": {"DispatcherFunctionRole", "ChatFanoutFunctionRole"},
		"dynamodb:liststreams":      {"DispatcherFunctionRole", "ChatFanoutFunctionRole"},
		// The stream mappings' failure queues: the mappings send with
		// their functions' roles.
		"sqs:": {"DispatcherFunctionRole", "ChatFanoutFunctionRole"},
		// The stream tasks' certificate behind the NLB (StreamTlsSecretArn).
		"secretsmanager:": {"StreamTaskRole"},
	}
	// The stream tasks read StreamTlsSecretArn and nothing else of Secrets
	// Manager or SSM (an ARN naming nothing when there is none).
	var tls []string
	for _, st := range m.Roles["StreamTaskRole"].Statements {
		if strings.Contains(st, " secretsmanager:") || strings.Contains(st, " ssm:") {
			tls = append(tls, st)
		}
	}
	if want := "[Allow secretsmanager:getsecretvalue on ${Fn::If(StreamNlbTls, ${StreamTlsSecretArn}, arn:${AWS::Partition}:secretsmanager:${AWS::Region}:${AWS::AccountId}:secret:${AWS::StackName}-no-stream-tls)} " +
		"Allow ssm:getparameter on ${Fn::If(StreamNlbTls, ${StreamTlsSecretArn}, arn:${AWS::Partition}:secretsmanager:${AWS::Region}:${AWS::AccountId}:secret:${AWS::StackName}-no-stream-tls)}]"; fmt.Sprint(tls) != want {
		t.Errorf("StreamTaskRole: certificate reads %v, want %s", tls, want)
	}
	// Each may send to its own failure queue, nothing else of SQS.
	for roleID, queue := range map[string]string{"DispatcherFunctionRole": "DispatcherFailureQueue", "ChatFanoutFunctionRole": "ChatFanoutFailureQueue"} {
		var sqs []string
		for _, st := range m.Roles[roleID].Statements {
			if strings.Contains(st, " sqs:") {
				sqs = append(sqs, st)
			}
		}
		if want := "[Allow sqs:sendmessage on ${" + queue + ".Arn}]"; fmt.Sprint(sqs) != want {
			t.Errorf("%s: SQS %v, want %s", roleID, sqs, want)
		}
	}
	// Every function is traced (X-Ray active tracing) and may send its
	// segments.
	for id, f := range m.Functions {
		if f.Tracing != "Active" || !containsString(m.Roles[f.Role].Statements, xrayPut) || !containsString(m.Roles[f.Role].Statements, xrayTelemetry) {
			t.Errorf("%s: tracing %q, role %s: %v", id, f.Tracing, f.Role, m.Roles[f.Role].Statements)
		}
	}
	// Only the Chat API's streams are served by a function URL, and it is
	// public (no auth: the Chat API checks its user keys) and streams.
	for id, f := range m.Functions {
		if f.URL != "" && (id != "ChatStreamFunction" || f.URL != "NONE RESPONSE_STREAM") {
			t.Errorf("%s: function URL %q (only ChatStreamFunction's, NONE RESPONSE_STREAM)", id, f.URL)
		}
		if containsString(f.InvokedBy, publicURL) != (id == "ChatStreamFunction") {
			t.Errorf("%s: invoked by %v (only ChatStreamFunction is public, through its URL)", id, f.InvokedBy)
		}
	}
	// The fan-out reads signals and listeners, writes inboxes, deletes
	// expired listeners: nothing else of the table, no index.
	for _, st := range m.Roles["ChatFanoutFunctionRole"].Statements {
		fields := strings.Fields(st)
		if strings.HasPrefix(fields[1], "dynamodb:") && !strings.Contains(st, "StreamArn") && fields[1] != "dynamodb:liststreams" &&
			(!containsString([]string{"dynamodb:getitem", "dynamodb:query", "dynamodb:putitem", "dynamodb:deleteitem"}, fields[1]) || fields[3] != "${Table.Arn}") {
			t.Errorf("ChatFanoutFunctionRole: beyond item reads and writes of the table: %s", st)
		}
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
			// Listing functions and roles (the teardown's) has no
			// resource-level permissions either.
			listing := roleID == "TeardownFunctionRole" && (action == "lambda:listfunctions" || action == "iam:listroles") ||
				// ECR's authorization token has none either.
				roleID == "StreamExecutionRole" && action == "ecr:getauthorizationtoken"
			// X-Ray's trace segments and telemetry have none either.
			xray := action == "xray:puttracesegments" || action == "xray:puttelemetryrecords"
			if strings.HasPrefix(action, "xray:") && !xray {
				t.Errorf("%s: X-Ray beyond sending traces: %s", roleID, st)
			}
			if resource == "*" && action != "logs:getqueryresults" && action != "logs:stopquery" && action != "dynamodb:liststreams" && !listing && !xray {
				t.Errorf("%s: any resource (only the Logs Insights query calls, ListStreams and the teardown's ListFunctions and ListRoles, which have no resource-level permissions, may): %s", roleID, st)
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
			if strings.HasPrefix(action, "iam:") && action != "iam:passrole" && !listing {
				if resource != codeRoles {
					t.Errorf("%s: IAM beyond deployed code's roles: %s", roleID, st)
				}
				switch action {
				case "iam:createrole", "iam:putrolepolicy":
					if !strings.Contains(st, `"iam:PermissionsBoundary":"${CodeBoundary}"`) {
						t.Errorf("%s: a role made or changed without the boundary: %s", roleID, st)
					}
				case "iam:getrole", "iam:deleterolepolicy", "iam:deleterole":
				case "iam:listrolepolicies":
					if roleID != "TeardownFunctionRole" {
						t.Errorf("%s: %s", roleID, st)
					}
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
				} else if listing {
				} else if resource != codeFunctions || (action != "lambda:invokefunction" && roleID != "AdminFunctionRole" &&
					!(roleID == "TeardownFunctionRole" && action == "lambda:deletefunction")) {
					t.Errorf("%s: Lambda beyond invoking deployed code's functions: %s", roleID, st)
				}
			}
			// The admin function keeps deployed code, icons and readmes:
			// the bucket's code/ keys; of the files of bots it may only
			// delete (deleteBot).
			if roleID == "AdminFunctionRole" && strings.HasPrefix(action, "s3:") &&
				!(resource == "${FilesBucket.Arn}/code/*" && (action == "s3:getobject" || action == "s3:putobject" || action == "s3:deleteobject")) &&
				!(resource == "${FilesBucket.Arn}/files/*" && action == "s3:deleteobject") &&
				!(resource == "${FilesBucket.Arn}" && action == "s3:listbucket") {
				t.Errorf("%s: bucket access beyond code/ keys and deleting files/ keys: %s", roleID, st)
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
	// The chat area's hosts (the chat function behind API Gateway, the
	// streaming function, the stream tasks) touch the bucket only for the
	// Webchat API's files: files/ objects read, written and tagged, never
	// deleted, and nothing of code/.
	webchatFiles := []string{
		"Allow s3:getobject on ${FilesBucket.Arn}/files/*", "Allow s3:putobject on ${FilesBucket.Arn}/files/*",
		"Allow s3:putobjecttagging on ${FilesBucket.Arn}/files/*", "Allow s3:listbucket on ${FilesBucket.Arn}",
	}
	for _, id := range []string{"ChatFunctionRole", "ChatStreamFunctionRole", "StreamTaskRole"} {
		role, ok := m.Roles[id]
		if !ok {
			continue // the stream tier's roles exist with their tier only
		}
		for _, st := range role.Statements {
			if (strings.Contains(st, "s3:") || strings.Contains(st, "FilesBucket")) && !containsString(webchatFiles, st) {
				t.Errorf("%s touches the bucket beyond the Webchat API's files: %s", id, st)
			}
		}
	}
	if _, ok := m.Functions["ChatFunction"].Env["PLATFORM_BUCKET"]; !ok {
		t.Error("the chat function is not told the bucket's name (the Webchat API's POST /files)")
	}
	// Only the API functions (behind API Gateway or the streams' function
	// URL) hold the paging key.
	for id, f := range m.Functions {
		_, has := f.Env["PLATFORM_PAGING_KEY"]
		api := f.InvokedBy != nil && (containsString(f.InvokedBy, "apigateway.amazonaws.com") || containsString(f.InvokedBy, publicURL))
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
	want = append(want, "Allow dynamodb:liststreams on *", "Allow sqs:sendmessage on ${DispatcherFailureQueue.Arn}", xrayPut, xrayTelemetry,
		"Allow lambda:invokefunction on arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:function:${AWS::StackName}-code-*")
	for _, g := range []string{"DispatcherLogGroup", "BotLogGroup", "IntegrationLogGroup"} {
		want = append(want, "Allow logs:createlogstream on ${"+g+".Arn}", "Allow logs:putlogevents on ${"+g+".Arn}")
	}
	if got := m.Roles["DispatcherFunctionRole"].Statements; fmt.Sprint(got) != fmt.Sprint(uniq(want)) {
		t.Errorf("DispatcherFunctionRole:\n got  %v\n want %v", got, uniq(want))
	}
	// The functions that delete bots (admin: deleteBot; the sweeper: what
	// deleteBot left) may delete their files' contents: without it a
	// deleted bot's contents would stay in the bucket.
	for _, r := range []string{"AdminFunctionRole", "SweeperFunctionRole"} {
		if !containsString(m.Roles[r].Statements, "Allow s3:deleteobject on ${FilesBucket.Arn}/files/*") {
			t.Errorf("%s cannot delete the contents of a deleted bot's files: %v", r, m.Roles[r].Statements)
		}
	}
	// The sweeper: its log group, item access, deleting files/ keys;
	// nothing more.
	want = nil
	for _, a := range []string{"getitem", "batchgetitem", "query", "putitem", "updateitem", "deleteitem", "batchwriteitem", "conditioncheckitem"} {
		want = append(want, "Allow dynamodb:"+a+" on ${Table.Arn}", "Allow dynamodb:"+a+" on ${Table.Arn}/index/*")
	}
	want = append(want, "Allow logs:createlogstream on ${SweeperLogGroup.Arn}", "Allow logs:putlogevents on ${SweeperLogGroup.Arn}",
		"Allow s3:deleteobject on ${FilesBucket.Arn}/files/*", xrayPut, xrayTelemetry)
	if got := m.Roles["SweeperFunctionRole"].Statements; fmt.Sprint(got) != fmt.Sprint(uniq(want)) {
		t.Errorf("SweeperFunctionRole:\n got  %v\n want %v", got, uniq(want))
	}
	// The teardown: list and delete deployed code's functions and roles,
	// nothing more (no table, no bucket, no making or passing roles).
	want = []string{"Allow iam:deleterole on " + codeRolesARN, "Allow iam:deleterolepolicy on " + codeRolesARN,
		"Allow iam:listrolepolicies on " + codeRolesARN, "Allow iam:listroles on *",
		"Allow lambda:deletefunction on " + codeFunctionsARN, "Allow lambda:listfunctions on *",
		"Allow logs:createlogstream on ${TeardownLogGroup.Arn}", "Allow logs:putlogevents on ${TeardownLogGroup.Arn}", xrayPut, xrayTelemetry}
	if got := m.Roles["TeardownFunctionRole"].Statements; fmt.Sprint(got) != fmt.Sprint(uniq(want)) {
		t.Errorf("TeardownFunctionRole:\n got  %v\n want %v", got, uniq(want))
	}
	// Deployed code goes with the stack: CodeTeardown runs the teardown
	// function, after the admin function is gone and before CodeBoundary.
	if cr := m.CustomResources["CodeTeardown"]; cr.Type != "Custom::CodeTeardown" || cr.Properties["ServiceToken"] != "${TeardownFunction.Arn}" ||
		fmt.Sprint(cr.DependsOn) != "[CodeBoundary]" || !containsString(m.Functions["AdminFunction"].DependsOn, "CodeTeardown") {
		t.Errorf("CodeTeardown %+v; AdminFunction depends on %v", cr, m.Functions["AdminFunction"].DependsOn)
	}
	if env := m.Functions["TeardownFunction"].Env; env["PLATFORM_CODE_PREFIX"] != m.Functions["AdminFunction"].Env["PLATFORM_CODE_PREFIX"] ||
		env["PLATFORM_CODE_ROLE_PATH"] != m.Functions["AdminFunction"].Env["PLATFORM_CODE_ROLE_PATH"] {
		t.Errorf("the teardown and the admin function name deployed code differently: %v, %v", env, m.Functions["AdminFunction"].Env)
	}
	// The boundary of deployed code's roles: their own log streams at most.
	if b := m.ManagedPolicies["CodeBoundary"]; fmt.Sprint(b) != "[Allow logs:createlogstream on ${BotLogGroup.Arn} Allow logs:createlogstream on ${IntegrationLogGroup.Arn} Allow logs:putlogevents on ${BotLogGroup.Arn} Allow logs:putlogevents on ${IntegrationLogGroup.Arn}]" {
		t.Errorf("CodeBoundary allows more than writing the bot and integration log groups: %v", b)
	}
	if s := m.Roles["SchedulerRole"]; fmt.Sprint(s.Statements) != "[Allow lambda:invokefunction on ${SchedulerFunction.Arn}]" {
		t.Errorf("SchedulerRole may do more than invoke the scheduler function: %v", s.Statements)
	}
}

// Every function's role sends its traces (X-Ray active tracing).
const (
	xrayPut       = "Allow xray:puttracesegments on *"
	xrayTelemetry = "Allow xray:puttelemetryrecords on *"
)

const (
	codeRolesARN     = "arn:${AWS::Partition}:iam::${AWS::AccountId}:role/${AWS::StackName}-code/*"
	codeFunctionsARN = "arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:function:${AWS::StackName}-code-*"
)

func containsString(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// On the container tier the stream function and its public URL do not
// exist: they would let anyone bypass the load balancer and the tier's
// bounds. Everything of it is under StreamOnLambda, the negation of
// StreamOnContainer.
func TestStreamFunctionOnLambdaTierOnly(t *testing.T) {
	tmpl := stackTemplate(t)
	check(t, "StreamOnLambda", func() {
		tmpl.HasCondition(jsii.String("StreamOnLambda"), obj{"Fn::Not": []any{obj{"Condition": "StreamOnContainer"}}})
	})
	for id, typ := range map[string]string{
		"ChatStreamFunction":                     "AWS::Lambda::Function",
		"ChatStreamFunctionUrl":                  "AWS::Lambda::Url",
		"ChatStreamFunctionUrlPublicPermissions": "AWS::Lambda::Permission",
		"ChatStreamFunctionUrlInvokePermission":  "AWS::Lambda::Permission",
		"ChatStreamFunctionRole":                 "AWS::IAM::Role",
		"ChatStreamLogGroup":                     "AWS::Logs::LogGroup",
	} {
		res := tmpl.FindResources(jsii.String(typ), obj{"Condition": "StreamOnLambda"})
		if _, ok := (*res)[id]; !ok {
			t.Errorf("%s (%s) is not under the condition StreamOnLambda", id, typ)
		}
	}
	// Nothing else of the stream function: every resource that names it
	// is one of those.
	for _, typ := range []string{"AWS::Lambda::Permission", "AWS::Lambda::Url", "AWS::IAM::Policy"} {
		for id, r := range *tmpl.FindResources(jsii.String(typ), nil) {
			if strings.Contains(fmt.Sprint(*r), "ChatStreamFunction") && (*r)["Condition"] != "StreamOnLambda" {
				t.Errorf("%s names the stream function without the condition StreamOnLambda", id)
			}
		}
	}
}
