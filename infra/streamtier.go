package main

import (
	"maps"
	"slices"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapplicationautoscaling"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsecs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awselasticloadbalancingv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// The container stream tier (StreamTier container; docs/deploy.md
// "Stream tiers"), as template.yaml has it: functions/chatstream-service
// on ECS Fargate behind an Application Load Balancer, scaled on client
// connections per task. Its resources exist under the StreamOnContainer
// condition only; ChatStreamUrl names the load balancer then.

// streamTier defines the tier's parameters, conditions and resources and
// answers the ChatStreamUrl output's value.
func (s *builder) streamTier() *string {
	param := func(id string, p *awscdk.CfnParameterProps) awscdk.CfnParameter {
		return awscdk.NewCfnParameter(s.stack, jsii.String(id), p)
	}
	tier := param("StreamTier", &awscdk.CfnParameterProps{Type: jsii.String("String"), Default: jsii.String("lambda"),
		AllowedValues: jsii.Strings("lambda", "container"),
		Description: jsii.String("Where the Chat API's streams are held: lambda (one invocation of ChatStreamFunction per stream) " +
			"or container (an ECS Fargate service behind an Application Load Balancer; set StreamImage, StreamVpcId and StreamSubnetIds).")})
	image := param("StreamImage", &awscdk.CfnParameterProps{Type: jsii.String("String"), Default: jsii.String(""),
		Description: jsii.String("Container tier: the image of functions/chatstream-service (linux/arm64; make stream-image writes it as an OCI tarball to push to ECR).")})
	vpc := param("StreamVpcId", &awscdk.CfnParameterProps{Type: jsii.String("String"), Default: jsii.String(""),
		Description: jsii.String("Container tier: the VPC of the load balancer and the tasks.")})
	subnets := param("StreamSubnetIds", &awscdk.CfnParameterProps{Type: jsii.String("CommaDelimitedList"), Default: jsii.String(""),
		Description: jsii.String("Container tier: two public subnets of StreamVpcId in distinct availability zones (the load balancer's and the tasks'; " +
			"the tasks get public addresses to pull their image); more are not used.")})
	cert := param("StreamCertificateArn", &awscdk.CfnParameterProps{Type: jsii.String("String"), Default: jsii.String(""),
		Description: jsii.String("Container tier: ACM certificate of the load balancer's HTTPS listener; empty: an HTTP listener (browsers on HTTPS pages need HTTPS).")})
	minTasks := param("StreamMinTasks", &awscdk.CfnParameterProps{Type: jsii.String("Number"), Default: jsii.String("2"), MinValue: jsii.Number(1),
		Description: jsii.String("Container tier: tasks kept at least (one per availability zone).")})
	maxTasks := param("StreamMaxTasks", &awscdk.CfnParameterProps{Type: jsii.String("Number"), Default: jsii.String("20"), MinValue: jsii.Number(1),
		Description: jsii.String("Container tier: tasks at most; each holds up to about 10,000 streams (docs/deploy.md).")})
	target := param("StreamTargetConnections", &awscdk.CfnParameterProps{Type: jsii.String("Number"), Default: jsii.String("5000"), MinValue: jsii.Number(1),
		Description: jsii.String("Container tier: the service scales to keep this many client connections per task " +
			"(the load balancer's ActiveConnectionCount over its healthy targets).")})
	// The container tier's load balancer (docs/deploy.md "Choosing the
	// load balancer"): alb ends TLS; nlb passes TCP through with proxy
	// protocol v2 and the tasks end TLS (shared/streamedge).
	lbType := param("StreamLoadBalancerType", &awscdk.CfnParameterProps{Type: jsii.String("String"), Default: jsii.String("alb"),
		AllowedValues: jsii.Strings("alb", "nlb"),
		Description: jsii.String("Container tier: alb (an Application Load Balancer ends TLS) or nlb (a Network Load Balancer passes TCP through " +
			"with proxy protocol v2; the tasks end TLS with StreamTlsSecretArn's certificate).")})
	tlsSecret := param("StreamTlsSecretArn", &awscdk.CfnParameterProps{Type: jsii.String("String"), Default: jsii.String(""),
		Description: jsii.String("Container tier with StreamLoadBalancerType nlb: the ARN of a Secrets Manager secret or SSM SecureString parameter " +
			"whose value is the certificate chain and private key (PEM) the tasks serve, read again every 5 minutes (the task role may read that one only); " +
			"empty: plain HTTP on port 80.")})

	onContainer := awscdk.NewCfnCondition(s.stack, jsii.String("StreamOnContainer"), &awscdk.CfnConditionProps{
		Expression: awscdk.Fn_ConditionEquals(tier.ValueAsString(), jsii.String("container"))})
	cond := func(id string, e awscdk.ICfnConditionExpression) awscdk.CfnCondition {
		return awscdk.NewCfnCondition(s.stack, jsii.String(id), &awscdk.CfnConditionProps{Expression: e})
	}
	noCert := awscdk.Fn_ConditionEquals(cert.ValueAsString(), jsii.String(""))
	onAlb := cond("StreamOnAlb", awscdk.Fn_ConditionAnd(onContainer, awscdk.Fn_ConditionEquals(lbType.ValueAsString(), jsii.String("alb"))))
	onNlb := cond("StreamOnNlb", awscdk.Fn_ConditionAnd(onContainer, awscdk.Fn_ConditionEquals(lbType.ValueAsString(), jsii.String("nlb"))))
	albHttps := cond("StreamAlbHttps", awscdk.Fn_ConditionAnd(onAlb, awscdk.Fn_ConditionNot(noCert)))
	albHttp := cond("StreamAlbHttp", awscdk.Fn_ConditionAnd(onAlb, noCert))
	noSecret := awscdk.Fn_ConditionEquals(tlsSecret.ValueAsString(), jsii.String(""))
	nlbTLS := cond("StreamNlbTls", awscdk.Fn_ConditionAnd(onNlb, awscdk.Fn_ConditionNot(noSecret)))
	nlbPlain := cond("StreamNlbPlain", awscdk.Fn_ConditionAnd(onNlb, noSecret))
	https := cond("StreamHttps", awscdk.Fn_ConditionOr(albHttps, nlbTLS))
	cond("StreamHttp", awscdk.Fn_ConditionAnd(onContainer, awscdk.Fn_ConditionNot(https)))
	ifNlb := func(nlb, alb any) *string {
		return awscdk.Fn_ConditionIf(jsii.String("StreamOnNlb"), nlb, alb).ToString()
	}
	when := func(r awscdk.CfnResource, id string, c awscdk.CfnCondition) {
		r.OverrideLogicalId(jsii.String(id))
		r.CfnOptions().SetCondition(c)
	}
	// ChatStreamFunction, its public URL and their role and log group exist
	// with StreamTier lambda only: on the container tier they would let
	// anyone bypass the load balancer and the tier's bounds.
	onLambda := awscdk.NewCfnCondition(s.stack, jsii.String("StreamOnLambda"), &awscdk.CfnConditionProps{
		Expression: awscdk.Fn_ConditionNot(onContainer)})
	s.chatStreamOnLambda(onLambda)
	s.onLambda, s.onContainer, s.onAlb = onLambda, onContainer, onAlb
	twoSubnets := &[]*string{awscdk.Fn_Select(jsii.Number(0), subnets.ValueAsList()), awscdk.Fn_Select(jsii.Number(1), subnets.ValueAsList())}

	cluster := awsecs.NewCfnCluster(s.stack, jsii.String("StreamCluster"), nil)
	when(cluster, "StreamCluster", onContainer)
	logs := awslogs.NewCfnLogGroup(s.stack, jsii.String("StreamLogGroup"), &awslogs.CfnLogGroupProps{
		LogGroupName: awscdk.Fn_Sub(jsii.String("/ecs/${AWS::StackName}-chatstream"), nil), RetentionInDays: s.retention.ValueAsNumber()})
	when(logs, "StreamLogGroup", onContainer)
	logs.ApplyRemovalPolicy(awscdk.RemovalPolicy_DESTROY, nil)

	tasks := awsiam.NewServicePrincipal(jsii.String("ecs-tasks.amazonaws.com"), nil)
	execRole := awsiam.NewRole(s.stack, jsii.String("StreamExecutionRole"), &awsiam.RoleProps{AssumedBy: tasks,
		InlinePolicies: &map[string]awsiam.PolicyDocument{"pull-and-log": policy(
			allow([]string{"ecr:GetAuthorizationToken"}, jsii.String("*")),
			allow([]string{"ecr:BatchCheckLayerAvailability", "ecr:GetDownloadUrlForLayer", "ecr:BatchGetImage"},
				awscdk.Fn_Sub(jsii.String("arn:${AWS::Partition}:ecr:${AWS::Region}:${AWS::AccountId}:repository/*"), nil)),
			allow([]string{"logs:CreateLogStream", "logs:PutLogEvents"}, logs.AttrArn()),
		)}})
	when(execRole.Node().DefaultChild().(awscdk.CfnResource), "StreamExecutionRole", onContainer)
	// ChatStreamFunctionRole's grants but its own log group.
	docs := s.policies("ChatStream")
	// Behind the NLB the task reads its certificate: StreamTlsSecretArn
	// only (the other service's action never matches it); without one, an
	// ARN that names nothing.
	docs["stream-tls"] = policy(allow([]string{"secretsmanager:GetSecretValue", "ssm:GetParameter"},
		awscdk.Fn_ConditionIf(jsii.String("StreamNlbTls"), tlsSecret.ValueAsString(),
			awscdk.Fn_Sub(jsii.String("arn:${AWS::Partition}:secretsmanager:${AWS::Region}:${AWS::AccountId}:secret:${AWS::StackName}-no-stream-tls"), nil)).ToString()))
	taskRole := awsiam.NewRole(s.stack, jsii.String("StreamTaskRole"), &awsiam.RoleProps{AssumedBy: tasks, InlinePolicies: &docs})
	when(taskRole.Node().DefaultChild().(awscdk.CfnResource), "StreamTaskRole", onContainer)

	// Sorted by name, as template.yaml lists them.
	vars := map[string]*string{}
	add := func(k string, v *string) { vars[k] = v }
	add("PORT", jsii.String("8080"))
	add("PLATFORM_TABLE", s.table.TableName())
	add("PLATFORM_BUILTINS", jsii.String("all"))
	// The task's inbox poll (shared/taskrelay): while signals flow, and
	// while idle.
	add("PLATFORM_STREAM_POLL", jsii.String("25ms"))
	add("PLATFORM_STREAM_POLL_IDLE", jsii.String("250ms"))
	// Behind the NLB: the proxy header required from the VPC's ranges, and
	// the task's own TLS (shared/streamedge).
	add("PLATFORM_PROXY_PROTOCOL", ifNlb("10.0.0.0/8,172.16.0.0/12,192.168.0.0/16", ""))
	add("PLATFORM_STREAM_TLS_SECRET", awscdk.Fn_ConditionIf(jsii.String("StreamNlbTls"), tlsSecret.ValueAsString(), "").ToString())
	for k, v := range s.environment("ChatStream") {
		add(k, v)
	}
	// The task is reached only through the load balancer (its security
	// group), whose addresses are the VPC's: a private range. Behind it the
	// client is the right-most X-Forwarded-For entry the ALB appended
	// (shared/clientip); the operator's TrustedProxies add a CloudFront in
	// front, or a VPC outside these ranges. Behind the NLB the peer is the
	// proxy header's client: TrustedProxies only.
	add("PLATFORM_TRUSTED_PROXIES", ifNlb(s.trustedProxies.ValueAsString(), awscdk.Fn_Sub(jsii.String(streamTaskTrustedProxies), nil)))
	for _, q := range quotaParameters {
		add(q.env, s.quotas[q.env].ValueAsString())
	}
	for _, l := range llmParameters {
		add(l.env, s.llm[l.env].ValueAsString())
	}
	add("PLATFORM_OUTBOX_SWEEP_INDEX", s.sweepIndex.ValueAsString())
	env := []any{}
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		env = append(env, &awsecs.CfnTaskDefinition_KeyValuePairProperty{Name: jsii.String(k), Value: vars[k]})
	}
	taskDef := awsecs.NewCfnTaskDefinition(s.stack, jsii.String("StreamTaskDefinition"), &awsecs.CfnTaskDefinitionProps{
		Family:                  awscdk.Fn_Sub(jsii.String("${AWS::StackName}-chatstream"), nil),
		RequiresCompatibilities: jsii.Strings("FARGATE"),
		NetworkMode:             jsii.String("awsvpc"),
		Cpu:                     jsii.String("512"),
		Memory:                  jsii.String("2048"),
		RuntimePlatform: &awsecs.CfnTaskDefinition_RuntimePlatformProperty{
			CpuArchitecture: jsii.String("ARM64"), OperatingSystemFamily: jsii.String("LINUX")},
		ExecutionRoleArn: execRole.RoleArn(),
		TaskRoleArn:      taskRole.RoleArn(),
		ContainerDefinitions: &[]any{&awsecs.CfnTaskDefinition_ContainerDefinitionProperty{
			Name: jsii.String("chatstream"), Image: image.ValueAsString(), Essential: jsii.Bool(true),
			PortMappings: &[]any{&awsecs.CfnTaskDefinition_PortMappingProperty{ContainerPort: jsii.Number(8080), Protocol: jsii.String("tcp")}},
			StopTimeout:  jsii.Number(30),
			Ulimits: &[]any{&awsecs.CfnTaskDefinition_UlimitProperty{Name: jsii.String("nofile"),
				SoftLimit: jsii.Number(65536), HardLimit: jsii.Number(65536)}},
			Environment: &env,
			LogConfiguration: &awsecs.CfnTaskDefinition_LogConfigurationProperty{LogDriver: jsii.String("awslogs"),
				Options: &map[string]*string{"awslogs-group": logs.Ref(), "awslogs-region": awscdk.Aws_REGION(), "awslogs-stream-prefix": jsii.String("chatstream")}},
		}},
	})
	when(taskDef, "StreamTaskDefinition", onContainer)

	lbSG := awsec2.NewCfnSecurityGroup(s.stack, jsii.String("StreamLoadBalancerSecurityGroup"), &awsec2.CfnSecurityGroupProps{
		GroupDescription: jsii.String("Chat API streams load balancer"), VpcId: vpc.ValueAsString(),
		SecurityGroupIngress: &[]any{
			&awsec2.CfnSecurityGroup_IngressProperty{IpProtocol: jsii.String("tcp"), FromPort: jsii.Number(443), ToPort: jsii.Number(443), CidrIp: jsii.String("0.0.0.0/0")},
			&awsec2.CfnSecurityGroup_IngressProperty{IpProtocol: jsii.String("tcp"), FromPort: jsii.Number(80), ToPort: jsii.Number(80), CidrIp: jsii.String("0.0.0.0/0")},
		}})
	when(lbSG, "StreamLoadBalancerSecurityGroup", onContainer)
	taskSG := awsec2.NewCfnSecurityGroup(s.stack, jsii.String("StreamTaskSecurityGroup"), &awsec2.CfnSecurityGroupProps{
		GroupDescription: jsii.String("Chat API stream tasks (from the load balancer only)"), VpcId: vpc.ValueAsString(),
		SecurityGroupIngress: &[]any{&awsec2.CfnSecurityGroup_IngressProperty{IpProtocol: jsii.String("tcp"),
			FromPort: jsii.Number(8080), ToPort: jsii.Number(8080), SourceSecurityGroupId: lbSG.AttrGroupId()}}})
	when(taskSG, "StreamTaskSecurityGroup", onContainer)

	lb := awselasticloadbalancingv2.NewCfnLoadBalancer(s.stack, jsii.String("StreamLoadBalancer"), &awselasticloadbalancingv2.CfnLoadBalancerProps{
		Type: ifNlb("network", "application"), Scheme: jsii.String("internet-facing"), Subnets: twoSubnets,
		SecurityGroups: &[]*string{lbSG.AttrGroupId()},
		LoadBalancerAttributes: &[]any{&awselasticloadbalancingv2.CfnLoadBalancer_LoadBalancerAttributeProperty{
			Key: ifNlb("load_balancing.cross_zone.enabled", "idle_timeout.timeout_seconds"), Value: ifNlb("true", "120")}},
	})
	when(lb, "StreamLoadBalancer", onContainer)
	tg := awselasticloadbalancingv2.NewCfnTargetGroup(s.stack, jsii.String("StreamTargetGroup"), &awselasticloadbalancingv2.CfnTargetGroupProps{
		TargetType: jsii.String("ip"), Protocol: ifNlb("TCP", "HTTP"), Port: jsii.Number(8080), VpcId: vpc.ValueAsString(),
		HealthCheckProtocol: awscdk.Fn_ConditionIf(jsii.String("StreamNlbTls"), "HTTPS", "HTTP").ToString(),
		HealthCheckPath:     jsii.String("/healthz"), HealthCheckIntervalSeconds: jsii.Number(10), HealthyThresholdCount: jsii.Number(2),
		// The ALB's second attribute is its default (round robin): the
		// NLB's enables proxy protocol v2.
		TargetGroupAttributes: &[]any{
			&awselasticloadbalancingv2.CfnTargetGroup_TargetGroupAttributeProperty{Key: jsii.String("deregistration_delay.timeout_seconds"), Value: jsii.String("30")},
			&awselasticloadbalancingv2.CfnTargetGroup_TargetGroupAttributeProperty{
				Key: ifNlb("proxy_protocol_v2.enabled", "load_balancing.algorithm.type"), Value: ifNlb("true", "round_robin")},
		},
	})
	when(tg, "StreamTargetGroup", onContainer)
	forward := &[]any{&awselasticloadbalancingv2.CfnListener_ActionProperty{Type: jsii.String("forward"), TargetGroupArn: tg.Ref()}}
	httpsListener := awselasticloadbalancingv2.NewCfnListener(s.stack, jsii.String("StreamHttpsListener"), &awselasticloadbalancingv2.CfnListenerProps{
		LoadBalancerArn: lb.Ref(), Protocol: jsii.String("HTTPS"), Port: jsii.Number(443),
		Certificates:   &[]any{&awselasticloadbalancingv2.CfnListener_CertificateProperty{CertificateArn: cert.ValueAsString()}},
		DefaultActions: forward})
	when(httpsListener, "StreamHttpsListener", albHttps)
	httpListener := awselasticloadbalancingv2.NewCfnListener(s.stack, jsii.String("StreamHttpListener"), &awselasticloadbalancingv2.CfnListenerProps{
		LoadBalancerArn: lb.Ref(), Protocol: jsii.String("HTTP"), Port: jsii.Number(80), DefaultActions: forward})
	when(httpListener, "StreamHttpListener", albHttp)
	// The NLB's: TCP passed through, to tasks that end TLS (443) or serve
	// plain HTTP (80, no StreamTlsSecretArn).
	passListener := awselasticloadbalancingv2.NewCfnListener(s.stack, jsii.String("StreamTlsPassListener"), &awselasticloadbalancingv2.CfnListenerProps{
		LoadBalancerArn: lb.Ref(), Protocol: jsii.String("TCP"), Port: jsii.Number(443), DefaultActions: forward})
	when(passListener, "StreamTlsPassListener", nlbTLS)
	tcpListener := awselasticloadbalancingv2.NewCfnListener(s.stack, jsii.String("StreamTcpListener"), &awselasticloadbalancingv2.CfnListenerProps{
		LoadBalancerArn: lb.Ref(), Protocol: jsii.String("TCP"), Port: jsii.Number(80), DefaultActions: forward})
	when(tcpListener, "StreamTcpListener", nlbPlain)

	svc := awsecs.NewCfnService(s.stack, jsii.String("StreamService"), &awsecs.CfnServiceProps{
		Cluster: cluster.Ref(), LaunchType: jsii.String("FARGATE"), TaskDefinition: taskDef.Ref(),
		DesiredCount: minTasks.ValueAsNumber(), HealthCheckGracePeriodSeconds: jsii.Number(30),
		NetworkConfiguration: &awsecs.CfnService_NetworkConfigurationProperty{AwsvpcConfiguration: &awsecs.CfnService_AwsVpcConfigurationProperty{
			AssignPublicIp: jsii.String("ENABLED"), Subnets: twoSubnets, SecurityGroups: &[]*string{taskSG.AttrGroupId()}}},
		LoadBalancers: &[]any{&awsecs.CfnService_LoadBalancerProperty{ContainerName: jsii.String("chatstream"),
			ContainerPort: jsii.Number(8080), TargetGroupArn: tg.Ref()}},
	})
	when(svc, "StreamService", onContainer)
	// CloudFormation refuses a DependsOn naming a resource whose condition
	// is false (one listener never exists): the service waits on whichever
	// listener exists through a handle that references it.
	ready := awscdk.NewCfnWaitConditionHandle(s.stack, jsii.String("StreamListenerReady"), &awscdk.CfnWaitConditionHandleProps{})
	when(ready, "StreamListenerReady", onContainer)
	ready.AddMetadata(jsii.String("Listener"), awscdk.Fn_ConditionIf(jsii.String("StreamAlbHttps"), httpsListener.Ref(),
		awscdk.Fn_ConditionIf(jsii.String("StreamAlbHttp"), httpListener.Ref(),
			awscdk.Fn_ConditionIf(jsii.String("StreamNlbTls"), passListener.Ref(), tcpListener.Ref()))))
	svc.AddDependency(ready)

	scalable := awsapplicationautoscaling.NewCfnScalableTarget(s.stack, jsii.String("StreamScalableTarget"), &awsapplicationautoscaling.CfnScalableTargetProps{
		ServiceNamespace: jsii.String("ecs"), ScalableDimension: jsii.String("ecs:service:DesiredCount"),
		ResourceId:  awscdk.Fn_Sub(jsii.String("service/${StreamCluster}/${StreamService.Name}"), nil),
		MinCapacity: minTasks.ValueAsNumber(), MaxCapacity: maxTasks.ValueAsNumber(),
	})
	when(scalable, "StreamScalableTarget", onContainer)
	metric := func(name, stat string, dims ...[2]*string) *awsapplicationautoscaling.CfnScalingPolicy_TargetTrackingMetricStatProperty {
		var d []any
		for _, kv := range dims {
			d = append(d, &awsapplicationautoscaling.CfnScalingPolicy_TargetTrackingMetricDimensionProperty{Name: kv[0], Value: kv[1]})
		}
		return &awsapplicationautoscaling.CfnScalingPolicy_TargetTrackingMetricStatProperty{Stat: jsii.String(stat),
			Metric: &awsapplicationautoscaling.CfnScalingPolicy_TargetTrackingMetricProperty{
				Namespace: ifNlb("AWS/NetworkELB", "AWS/ApplicationELB"), MetricName: jsii.String(name), Dimensions: &d}}
	}
	lbDim := [2]*string{jsii.String("LoadBalancer"), lb.AttrLoadBalancerFullName()}
	policyRes := awsapplicationautoscaling.NewCfnScalingPolicy(s.stack, jsii.String("StreamScalingPolicy"), &awsapplicationautoscaling.CfnScalingPolicyProps{
		PolicyName: awscdk.Fn_Sub(jsii.String("${AWS::StackName}-chatstream-connections"), nil), PolicyType: jsii.String("TargetTrackingScaling"),
		ScalingTargetId: scalable.Ref(),
		TargetTrackingScalingPolicyConfiguration: &awsapplicationautoscaling.CfnScalingPolicy_TargetTrackingScalingPolicyConfigurationProperty{
			TargetValue: target.ValueAsNumber(), ScaleInCooldown: jsii.Number(300), ScaleOutCooldown: jsii.Number(60),
			CustomizedMetricSpecification: &awsapplicationautoscaling.CfnScalingPolicy_CustomizedMetricSpecificationProperty{Metrics: &[]any{
				&awsapplicationautoscaling.CfnScalingPolicy_TargetTrackingMetricDataQueryProperty{Id: jsii.String("active"), ReturnData: jsii.Bool(false),
					MetricStat: func() *awsapplicationautoscaling.CfnScalingPolicy_TargetTrackingMetricStatProperty {
						m := metric("ActiveConnectionCount", "Sum", lbDim)
						m.Metric.(*awsapplicationautoscaling.CfnScalingPolicy_TargetTrackingMetricProperty).MetricName = ifNlb("ActiveFlowCount", "ActiveConnectionCount")
						return m
					}()},
				&awsapplicationautoscaling.CfnScalingPolicy_TargetTrackingMetricDataQueryProperty{Id: jsii.String("healthy"), ReturnData: jsii.Bool(false),
					MetricStat: metric("HealthyHostCount", "Average", lbDim, [2]*string{jsii.String("TargetGroup"), tg.AttrTargetGroupFullName()})},
				&awsapplicationautoscaling.CfnScalingPolicy_TargetTrackingMetricDataQueryProperty{Id: jsii.String("perTask"),
					Expression: ifNlb("active / MAX([healthy, 1])", "active / 2 / MAX([healthy, 1])"), Label: jsii.String("client connections per task"), ReturnData: jsii.Bool(true)},
			}},
		},
	})
	when(policyRes, "StreamScalingPolicy", onContainer)

	return awscdk.Fn_ConditionIf(jsii.String("StreamHttps"),
		awscdk.Fn_Join(jsii.String(""), &[]*string{jsii.String("https://"), lb.AttrDnsName(), jsii.String("/")}),
		awscdk.Fn_ConditionIf(jsii.String("StreamHttp"),
			awscdk.Fn_Join(jsii.String(""), &[]*string{jsii.String("http://"), lb.AttrDnsName(), jsii.String("/")}),
			s.chatStreamURL.Url())).ToString()
}

// chatStreamOnLambda puts the stream function's resources under cond: the
// function, its URL and permissions (the function's children), its role
// (with any policy the CDK added to it) and its log group.
func (s *builder) chatStreamOnLambda(cond awscdk.CfnCondition) {
	var set func(c constructs.IConstruct)
	set = func(c constructs.IConstruct) {
		if r, ok := c.(awscdk.CfnResource); ok {
			r.CfnOptions().SetCondition(cond)
		}
		for _, child := range *c.Node().Children() {
			set(child)
		}
	}
	set(s.fns["ChatStream"])
	set(s.roles["ChatStream"])
	s.logs["ChatStream"].CfnOptions().SetCondition(cond)
}

// streamTaskTrustedProxies are the proxies a stream task believes: the
// private ranges its VPC's load balancer has addresses in, then the
// stack's TrustedProxies (template.yaml writes the same).
const streamTaskTrustedProxies = "10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,${TrustedProxies}"
