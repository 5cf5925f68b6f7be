package main

// Operating the stack (issue 33), as template.yaml's "operations" section
// has it: the table-stream mappings' failure destinations. L1 constructs
// throughout, so that each resource is written exactly as template.yaml
// writes it (the agreement test compares them whole).

import (
	"encoding/json"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"
)

// failureQueueNames: the functions fed by the table's stream and their
// failure queues' name suffixes.
var failureQueueNames = map[string]string{"Dispatcher": "dispatcher-failures", "ChatFanout": "chatfanout-failures"}

// failureDestinations makes the on-failure queues of the table-stream
// mappings: kept 14 days, SQS-managed encryption (no KMS key to grant).
func (s *builder) failureDestinations() {
	s.failureQueues = map[string]awssqs.CfnQueue{}
	for _, id := range []string{"Dispatcher", "ChatFanout"} {
		q := awssqs.NewCfnQueue(s.stack, jsii.String(id+"FailureQueue"), &awssqs.CfnQueueProps{
			QueueName:              awscdk.Fn_Sub(jsii.String("${AWS::StackName}-"+failureQueueNames[id]), nil),
			MessageRetentionPeriod: jsii.Number(1209600),
			SqsManagedSseEnabled:   jsii.Bool(true),
		})
		q.OverrideLogicalId(jsii.String(id + "FailureQueue"))
		s.failureQueues[id] = q
	}
}

// onFailure is a mapping's destination for the batches it gives up.
func (s *builder) onFailure(id string) *awslambda.CfnEventSourceMapping_DestinationConfigProperty {
	return &awslambda.CfnEventSourceMapping_DestinationConfigProperty{
		OnFailure: &awslambda.CfnEventSourceMapping_OnFailureProperty{Destination: s.failureQueues[id].AttrArn()},
	}
}

// sendToFailureQueue: the mapping sends with the function's role, to its
// own queue only.
func (s *builder) sendToFailureQueue(id string) awsiam.PolicyDocument {
	return policy(allow([]string{"sqs:SendMessage"}, s.failureQueues[id].AttrArn()))
}

// ---------------------------------------------------------------- alarms

// The custom metrics the alarms and the dashboard read: written by the
// functions through CloudWatch's Embedded Metric Format (shared/metrics,
// docs/metrics.md), stack-wide (no dimension).
const (
	metricsNamespace      = "BotPlatform"
	metricDeliveries      = "platform_deliveries_total"
	metricDeliveryFailure = "platform_delivery_failures_total"
	metricOutboxAge       = "platform_outbox_oldest_age_seconds"
)

// cfn is a CloudFormation value: literals, and intrinsics in their long
// form ({"Ref": ...}, {"Fn::Sub": ...}, {"Fn::GetAtt": [...]}).
type cfn = map[string]any

func ref(id string) cfn { return cfn{"Ref": id} }

// opsResource is one resource of operating the stack, written whole: the
// CDK app emits it as is and template.yaml holds the same (its "alarms and
// dashboard" section was printed from these: OPERATIONS_YAML=1 go test
// -run TestOperationsYAML; the agreement test keeps the two equal).
type opsResource struct {
	ID        string
	Type      string
	Condition string   // "" or a condition of the stack
	DependsOn []string // beyond what references imply
	Props     cfn
}

// Conditions of the operations resources.
const (
	domainCondition = "HasDomain"    // DomainName given
	wafCondition    = "WafOnStreams" // EnableWaf true, on the container stream tier's ALB (WAF does not attach to an NLB)
)

// alarmEmailCondition: the topic's email subscription exists when
// AlarmEmail is given.
const alarmEmailCondition = "HasAlarmEmail"

// metricStat is a MetricDataQuery of one metric.
func metricStat(id, namespace, metric, stat string, period int, dims ...cfn) cfn {
	m := cfn{"Namespace": namespace, "MetricName": metric}
	if len(dims) > 0 {
		l := []any{}
		for _, d := range dims {
			l = append(l, d)
		}
		m["Dimensions"] = l
	}
	return cfn{"Id": id, "ReturnData": false, "MetricStat": cfn{"Metric": m, "Period": period, "Stat": stat}}
}

func dim(name string, value any) cfn { return cfn{"Name": name, "Value": value} }

// alarm notifies the topic on entering and leaving ALARM; missing data
// (no traffic) is not breaching.
func alarm(id, description string, props cfn) opsResource {
	p := cfn{
		"AlarmName":        cfn{"Fn::Sub": "${AWS::StackName}-" + id},
		"AlarmDescription": description + " (docs/runbook.md#" + strings.ToLower(id) + ")",
		"AlarmActions":     []any{ref("AlarmTopic")},
		"OKActions":        []any{ref("AlarmTopic")},
		"TreatMissingData": "notBreaching",
	}
	for k, v := range props {
		p[k] = v
	}
	return opsResource{ID: id, Type: "AWS::CloudWatch::Alarm", Props: p}
}

// single is the properties of an alarm on one metric.
func single(namespace, metric, stat string, period, evaluations int, comparison string, threshold float64, dims ...cfn) cfn {
	p := cfn{"Namespace": namespace, "MetricName": metric, "Statistic": stat, "Period": period,
		"EvaluationPeriods": evaluations, "ComparisonOperator": comparison, "Threshold": threshold}
	if len(dims) > 0 {
		l := []any{}
		for _, d := range dims {
			l = append(l, d)
		}
		p["Dimensions"] = l
	}
	return p
}

// operationsResources are the alarms, their topic and the dashboard.
func operationsResources() []opsResource {
	out := []opsResource{
		{ID: "AlarmTopic", Type: "AWS::SNS::Topic", Props: cfn{"TopicName": cfn{"Fn::Sub": "${AWS::StackName}-alarms"}}},
		{ID: "AlarmEmailSubscription", Type: "AWS::SNS::Subscription", Condition: alarmEmailCondition,
			Props: cfn{"TopicArn": ref("AlarmTopic"), "Protocol": "email", "Endpoint": ref("AlarmEmail")}},
	}
	api := []cfn{dim("ApiId", ref("HttpApi")), dim("Stage", "$default")}
	out = append(out, alarm("Api5xxAlarm", "More than 5% of the API's requests answered 5xx over 5 minutes (at least 20 requests)", cfn{
		"EvaluationPeriods": 1, "ComparisonOperator": "GreaterThanThreshold", "Threshold": 5,
		"Metrics": []any{
			metricStat("errors", "AWS/ApiGateway", "5xx", "Sum", 300, api...),
			metricStat("requests", "AWS/ApiGateway", "Count", "Sum", 300, api...),
			cfn{"Id": "rate", "Label": "5xx, % of requests", "Expression": "IF(requests >= 20, 100 * errors / requests, 0)", "ReturnData": true},
		},
	}))
	for _, f := range Functions {
		fn := dim("FunctionName", ref(f.ID+"Function"))
		errs := alarm(f.ID+"FunctionErrorsAlarm", "The "+f.Dir+" function failed (unhandled error, crash or timeout) over 5 minutes",
			single("AWS/Lambda", "Errors", "Sum", 300, 1, "GreaterThanOrEqualToThreshold", 1, fn))
		throttles := alarm(f.ID+"FunctionThrottlesAlarm", "Lambda throttled invocations of the "+f.Dir+" function over 5 minutes",
			single("AWS/Lambda", "Throttles", "Sum", 300, 1, "GreaterThanOrEqualToThreshold", 1, fn))
		if f.ID == "ChatStream" {
			errs.Condition, throttles.Condition = "StreamOnLambda", "StreamOnLambda"
		}
		out = append(out, errs, throttles)
	}
	streams := alarm("ChatStreamConcurrencyAlarm", "The open Chat API streams held 80% of ChatStreamConcurrency for 3 minutes: more are refused with 429 at 100%", cfn{
		"EvaluationPeriods": 3, "ComparisonOperator": "GreaterThanOrEqualToThreshold", "Threshold": 80,
		"Metrics": []any{
			metricStat("streams", "AWS/Lambda", "ConcurrentExecutions", "Maximum", 60, dim("FunctionName", ref("ChatStreamFunction"))),
			cfn{"Id": "used", "Label": "streams, % of ChatStreamConcurrency", "Expression": cfn{"Fn::Sub": "100 * streams / ${ChatStreamConcurrency}"}, "ReturnData": true},
		},
	})
	streams.Condition = "StreamOnLambda" // the stream function exists on the lambda tier only
	out = append(out, streams,
		alarm("TableThrottlesAlarm", "DynamoDB throttled reads or writes of the table over 5 minutes", cfn{
			"EvaluationPeriods": 1, "ComparisonOperator": "GreaterThanOrEqualToThreshold", "Threshold": 1,
			"Metrics": []any{
				metricStat("reads", "AWS/DynamoDB", "ReadThrottleEvents", "Sum", 300, dim("TableName", ref("Table"))),
				metricStat("writes", "AWS/DynamoDB", "WriteThrottleEvents", "Sum", 300, dim("TableName", ref("Table"))),
				cfn{"Id": "throttles", "Label": "throttled requests", "Expression": "reads + writes", "ReturnData": true},
			},
		}),
		alarm("DispatcherIteratorAgeAlarm", "The dispatcher's stream mapping was more than 5 minutes behind the table for 5 minutes",
			single("AWS/Lambda", "IteratorAge", "Maximum", 60, 5, "GreaterThanThreshold", 300000, dim("FunctionName", ref("DispatcherFunction")))),
		alarm("ChatFanoutIteratorAgeAlarm", "The chat fan-out's stream mapping was more than a minute behind the table for 5 minutes",
			single("AWS/Lambda", "IteratorAge", "Maximum", 60, 5, "GreaterThanThreshold", 60000, dim("FunctionName", ref("ChatFanoutFunction")))),
		alarm("DeliveryFailuresAlarm", "At least 10 deliveries (events to bots, messages to integrations) failed over 5 minutes",
			single(metricsNamespace, metricDeliveryFailure, "Sum", 300, 1, "GreaterThanOrEqualToThreshold", 10)),
		alarm("OutboxAgeAlarm", "The oldest undelivered outbox entry was more than 5 minutes old for 10 minutes",
			single(metricsNamespace, metricOutboxAge, "Maximum", 60, 10, "GreaterThanThreshold", 300)),
	)
	for _, id := range []string{"Dispatcher", "ChatFanout"} {
		out = append(out, alarm(id+"FailureQueueAlarm", "A batch of the table's stream the "+failureQueueNames[id][:len(failureQueueNames[id])-len("-failures")]+" function gave up is waiting in its failure queue",
			single("AWS/SQS", "ApproximateNumberOfMessagesVisible", "Maximum", 300, 1, "GreaterThanOrEqualToThreshold", 1,
				dim("QueueName", cfn{"Fn::GetAtt": []any{id + "FailureQueue", "QueueName"}}))))
	}
	// The custom domain (DomainName, CertificateArn): the API's default
	// stage (SAM's HttpApiApiGatewayDefaultStage; the CDK app names its
	// own so) at https://<DomainName>/; point the domain's DNS at the
	// ApiDomainTarget output.
	out = append(out,
		opsResource{ID: "ApiDomainName", Type: "AWS::ApiGatewayV2::DomainName", Condition: domainCondition, Props: cfn{
			"DomainName":               ref("DomainName"),
			"DomainNameConfigurations": []any{cfn{"CertificateArn": ref("CertificateArn"), "EndpointType": "REGIONAL", "SecurityPolicy": "TLS_1_2"}},
		}},
		opsResource{ID: "ApiDomainMapping", Type: "AWS::ApiGatewayV2::ApiMapping", Condition: domainCondition, DependsOn: []string{"HttpApiApiGatewayDefaultStage"},
			Props: cfn{"ApiId": ref("HttpApi"), "DomainName": ref("ApiDomainName"), "Stage": "$default"}},
	)
	// AWS WAF cannot be associated with an HTTP API (nor a function URL):
	// the optional web ACL's per-address rate rule guards the container
	// tier's load balancer (docs/runbook.md "Throttling").
	visibility := func(name any) cfn {
		return cfn{"SampledRequestsEnabled": true, "CloudWatchMetricsEnabled": true, "MetricName": name}
	}
	out = append(out,
		opsResource{ID: "StreamWebAcl", Type: "AWS::WAFv2::WebACL", Condition: wafCondition, Props: cfn{
			"Name": cfn{"Fn::Sub": "${AWS::StackName}-streams"}, "Scope": "REGIONAL", "DefaultAction": cfn{"Allow": cfn{}},
			"VisibilityConfig": visibility(cfn{"Fn::Sub": "${AWS::StackName}-streams"}),
			"Rules": []any{cfn{"Name": "rate-per-address", "Priority": 0, "Action": cfn{"Block": cfn{}},
				"Statement":        cfn{"RateBasedStatement": cfn{"Limit": ref("WafRateLimit"), "AggregateKeyType": "IP"}},
				"VisibilityConfig": visibility("rate-per-address")}},
		}},
		opsResource{ID: "StreamWebAclAssociation", Type: "AWS::WAFv2::WebACLAssociation", Condition: wafCondition, Props: cfn{
			"ResourceArn": ref("StreamLoadBalancer"), "WebACLArn": cfn{"Fn::GetAtt": []any{"StreamWebAcl", "Arn"}},
		}},
	)
	out = append(out, opsResource{ID: "Dashboard", Type: "AWS::CloudWatch::Dashboard", Props: cfn{
		"DashboardName": cfn{"Fn::Sub": "${AWS::StackName}"},
		"DashboardBody": cfn{"Fn::Sub": dashboardBody()},
	}})
	return out
}

// dashboardBody is the dashboard's JSON (a Fn::Sub template): graphs per
// area, each area under a heading.
func dashboardBody() string {
	var widgets []any
	y := 0
	heading := func(text string) {
		widgets = append(widgets, cfn{"type": "text", "x": 0, "y": y, "width": 24, "height": 1, "properties": cfn{"markdown": "## " + text}})
		y++
	}
	row := func(graphs ...cfn) {
		w := 24 / len(graphs)
		for i, g := range graphs {
			widgets = append(widgets, cfn{"type": "metric", "x": i * w, "y": y, "width": w, "height": 6, "properties": g})
		}
		y += 6
	}
	graph := func(title, stat string, period int, metrics ...[]any) cfn {
		l := []any{}
		for _, m := range metrics {
			l = append(l, m)
		}
		return cfn{"title": title, "view": "timeSeries", "stacked": false, "region": "${AWS::Region}", "stat": stat, "period": period, "metrics": l}
	}
	api := []any{"ApiId", "${HttpApi}", "Stage", "$default"}
	with := func(ns, metric string, dims []any, opts ...cfn) []any {
		m := append([]any{ns, metric}, dims...)
		for _, o := range opts {
			m = append(m, o)
		}
		return m
	}
	heading("API (API Gateway)")
	row(graph("Requests", "Sum", 60, with("AWS/ApiGateway", "Count", api)),
		graph("Errors", "Sum", 60, with("AWS/ApiGateway", "4xx", api), with("AWS/ApiGateway", "5xx", api)),
		graph("Latency", "p50", 60, with("AWS/ApiGateway", "Latency", api, cfn{"stat": "p50"}), with("AWS/ApiGateway", "Latency", api, cfn{"stat": "p99"})))
	heading("Functions (Lambda)")
	var errs, throttles, duration [][]any
	for _, f := range Functions {
		d := []any{"FunctionName", "${AWS::StackName}-" + f.Dir}
		errs = append(errs, with("AWS/Lambda", "Errors", d, cfn{"label": f.Dir}))
		throttles = append(throttles, with("AWS/Lambda", "Throttles", d, cfn{"label": f.Dir}))
		duration = append(duration, with("AWS/Lambda", "Duration", d, cfn{"label": f.Dir}))
	}
	row(graph("Errors", "Sum", 60, errs...), graph("Throttles", "Sum", 60, throttles...), graph("Duration (p99)", "p99", 60, duration...))
	row(graph("Chat API streams (ChatStreamConcurrency: ${ChatStreamConcurrency})", "Maximum", 60,
		with("AWS/Lambda", "ConcurrentExecutions", []any{"FunctionName", "${AWS::StackName}-chatstream"}, cfn{"label": "open streams"})),
		graph("Stream mappings' iterator age (ms)", "Maximum", 60,
			with("AWS/Lambda", "IteratorAge", []any{"FunctionName", "${AWS::StackName}-dispatcher"}, cfn{"label": "dispatcher"}),
			with("AWS/Lambda", "IteratorAge", []any{"FunctionName", "${AWS::StackName}-chatfanout"}, cfn{"label": "chatfanout"})),
		graph("Failure queues (messages)", "Maximum", 300,
			with("AWS/SQS", "ApproximateNumberOfMessagesVisible", []any{"QueueName", "${DispatcherFailureQueue.QueueName}"}, cfn{"label": "dispatcher"}),
			with("AWS/SQS", "ApproximateNumberOfMessagesVisible", []any{"QueueName", "${ChatFanoutFailureQueue.QueueName}"}, cfn{"label": "chatfanout"})))
	heading("Table (DynamoDB)")
	table := []any{"TableName", "${Table}"}
	row(graph("Consumed capacity", "Sum", 60, with("AWS/DynamoDB", "ConsumedReadCapacityUnits", table), with("AWS/DynamoDB", "ConsumedWriteCapacityUnits", table)),
		graph("Throttled requests", "Sum", 60, with("AWS/DynamoDB", "ReadThrottleEvents", table), with("AWS/DynamoDB", "WriteThrottleEvents", table)))
	heading("Deliveries (the platform's metrics, namespace " + metricsNamespace + ")")
	row(graph("Deliveries", "Sum", 60, with(metricsNamespace, metricDeliveries, nil), with(metricsNamespace, metricDeliveryFailure, nil)),
		graph("Oldest undelivered outbox entry (s)", "Maximum", 60, with(metricsNamespace, metricOutboxAge, nil)))
	// One widget a line: readable in template.yaml.
	lines := make([]string, len(widgets))
	for i, w := range widgets {
		b, _ := json.Marshal(w)
		lines[i] = string(b)
	}
	return "{\"widgets\": [\n" + strings.Join(lines, ",\n") + "\n]}"

}

// alarms adds the operations resources (alarms, topic, dashboard) and
// their parameter and condition.
func (s *builder) alarms() {
	email := awscdk.NewCfnParameter(s.stack, jsii.String("AlarmEmail"), &awscdk.CfnParameterProps{
		Type: jsii.String("String"), Default: jsii.String(""),
		Description: jsii.String("Email address the alarms notify (SNS topic AlarmTopic; the address confirms the subscription first); " +
			"empty: none, subscribe to the topic yourself (docs/runbook.md)."),
	})
	has := awscdk.NewCfnCondition(s.stack, jsii.String(alarmEmailCondition), &awscdk.CfnConditionProps{
		Expression: awscdk.Fn_ConditionNot(awscdk.Fn_ConditionEquals(email.ValueAsString(), jsii.String("")))})
	// The custom domain and the web ACL (template.yaml's parameters).
	domain := awscdk.NewCfnParameter(s.stack, jsii.String("DomainName"), &awscdk.CfnParameterProps{
		Type: jsii.String("String"), Default: jsii.String(""),
		Description: jsii.String("Custom domain of the API and the console (api.example.com), with CertificateArn; " +
			"empty: the API's execute-api endpoint. Point its DNS at the ApiDomainTarget output."),
	})
	awscdk.NewCfnParameter(s.stack, jsii.String("CertificateArn"), &awscdk.CfnParameterProps{
		Type: jsii.String("String"), Default: jsii.String(""),
		Description: jsii.String("ACM certificate of DomainName, in the stack's region."),
	})
	enableWaf := awscdk.NewCfnParameter(s.stack, jsii.String("EnableWaf"), &awscdk.CfnParameterProps{
		Type: jsii.String("String"), Default: jsii.String("false"), AllowedValues: jsii.Strings("true", "false"),
		Description: jsii.String("true: an AWS WAF web ACL with a rate-based rule per client address (WafRateLimit) on the container " +
			"stream tier's load balancer (WAF cannot guard an HTTP API or a function URL: docs/runbook.md)."),
	})
	awscdk.NewCfnParameter(s.stack, jsii.String("WafRateLimit"), &awscdk.CfnParameterProps{
		Type: jsii.String("Number"), Default: jsii.Number(1000), MinValue: jsii.Number(10),
		Description: jsii.String("Requests one client address may make in 5 minutes before the web ACL blocks it (EnableWaf)."),
	})
	hasDomain := awscdk.NewCfnCondition(s.stack, jsii.String(domainCondition), &awscdk.CfnConditionProps{
		Expression: awscdk.Fn_ConditionNot(awscdk.Fn_ConditionEquals(domain.ValueAsString(), jsii.String("")))})
	waf := awscdk.NewCfnCondition(s.stack, jsii.String(wafCondition), &awscdk.CfnConditionProps{
		Expression: awscdk.Fn_ConditionAnd(awscdk.Fn_ConditionEquals(enableWaf.ValueAsString(), jsii.String("true")), s.onAlb)})
	conditions := map[string]awscdk.CfnCondition{alarmEmailCondition: has, "StreamOnLambda": s.onLambda, domainCondition: hasDomain, wafCondition: waf}
	for _, r := range operationsResources() {
		props := map[string]any(r.Props)
		res := awscdk.NewCfnResource(s.stack, jsii.String(r.ID), &awscdk.CfnResourceProps{Type: jsii.String(r.Type), Properties: &props})
		res.OverrideLogicalId(jsii.String(r.ID))
		if r.Condition != "" {
			res.CfnOptions().SetCondition(conditions[r.Condition])
		}
		if len(r.DependsOn) > 0 {
			res.AddOverride(jsii.String("DependsOn"), r.DependsOn)
		}
	}
	// The API's public base: the console, the API and the webhook URLs
	// the dispatcher gives integrations (PLATFORM_PUBLIC_URL) use it.
	s.publicURL = awscdk.Fn_ConditionIf(jsii.String(domainCondition), awscdk.Fn_Sub(jsii.String("https://${DomainName}"), nil), s.api_.ApiEndpoint()).ToString()
	target := awscdk.NewCfnOutput(s.stack, jsii.String("ApiDomainTarget"), &awscdk.CfnOutputProps{
		Description: jsii.String("With DomainName: the regional domain name its DNS record (CNAME or alias) points at"),
		Value:       awscdk.Fn_GetAtt(jsii.String("ApiDomainName"), jsii.String("RegionalDomainName")).ToString(),
		Condition:   hasDomain,
	})
	_ = target
}

// traceParameters are where the functions' spans go (docs/metrics.md
// "Tracing"), set on every function: to the X-Ray daemon Lambda runs for
// active tracing, which needs no permission beyond the roles' tracing
// policy (xray:PutTraceSegments).
func (s *builder) traceParameters() {
	s.trace = map[string]awscdk.CfnParameter{
		"PLATFORM_TRACE_EXPORT": awscdk.NewCfnParameter(s.stack, jsii.String("TraceExport"), &awscdk.CfnParameterProps{
			Type: jsii.String("String"), Default: jsii.String("xray"), AllowedValues: jsii.Strings("xray", "none"),
			Description: jsii.String("Where the functions send their spans: xray, to X-Ray through the daemon Lambda runs beside " +
				"each traced function (OTLP over UDP; enable CloudWatch Transaction Search once per account), or none " +
				"(PLATFORM_TRACE_EXPORT)."),
		}),
		"PLATFORM_TRACE_SAMPLE_RATIO": awscdk.NewCfnParameter(s.stack, jsii.String("TraceSampleRatio"), &awscdk.CfnParameterProps{
			Type: jsii.String("String"), Default: jsii.String("1"), AllowedPattern: jsii.String(`^(0(\.[0-9]+)?|1(\.0+)?)$`),
			ConstraintDescription: jsii.String("a number from 0 to 1"),
			Description: jsii.String("Share of requests whose spans are recorded, decided by trace id so that every function " +
				"of a request agrees (PLATFORM_TRACE_SAMPLE_RATIO)."),
		}),
	}
}
