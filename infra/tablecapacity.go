package main

import (
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapplicationautoscaling"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/jsii-runtime-go"
)

// tableProvisioned is the condition of the table's provisioned capacity
// mode (TableCapacityMode provisioned).
const tableProvisioned = "TableProvisioned"

// tableCapacity is the table's capacity mode (docs/deploy.md "Table
// capacity mode"), as template.yaml has it: on demand by default; with
// TableCapacityMode provisioned, the table and each index start at the
// minimum capacity and Application Auto Scaling keeps their read and write
// capacity at TableTargetUtilization of what they use. On demand, the
// stack is what it was: the mode's properties are AWS::NoValue and the
// auto scaling resources do not exist.
func (s *builder) tableCapacity() {
	param := func(id string, p *awscdk.CfnParameterProps) awscdk.CfnParameter {
		return awscdk.NewCfnParameter(s.stack, jsii.String(id), p)
	}
	mode := param("TableCapacityMode", &awscdk.CfnParameterProps{Type: jsii.String("String"), Default: jsii.String("on-demand"),
		AllowedValues: &[]*string{jsii.String("on-demand"), jsii.String("provisioned")},
		Description: jsii.String("The table's capacity mode: on-demand (pay per request) or provisioned " +
			"(pay per hour for the capacity provisioned, which auto scaling keeps at " +
			"TableTargetUtilization of what the table and each index use: cheaper " +
			"for a steady load, throttled in a burst until it scales). DynamoDB " +
			"allows 4 switches back to on-demand in 24 hours (docs/deploy.md).")})
	bound := func(id, def, description string) awscdk.CfnParameter {
		return param(id, &awscdk.CfnParameterProps{Type: jsii.String("Number"), Default: jsii.String(def), MinValue: jsii.Number(1),
			Description: jsii.String(description)})
	}
	minRead := bound("TableMinReadCapacity", "5", "With TableCapacityMode provisioned, the read capacity units auto scaling keeps at least, on the table and on each index (the units provisioned when the mode is switched).")
	maxRead := bound("TableMaxReadCapacity", "40000", "With TableCapacityMode provisioned, the read capacity units auto scaling provisions at most, on the table and on each index (a bound on the bill; reads above it are throttled).")
	minWrite := bound("TableMinWriteCapacity", "5", "With TableCapacityMode provisioned, the write capacity units auto scaling keeps at least, on the table and on each index (the units provisioned when the mode is switched).")
	maxWrite := bound("TableMaxWriteCapacity", "40000", "With TableCapacityMode provisioned, the write capacity units auto scaling provisions at most, on the table and on each index (a bound on the bill; writes above it are throttled).")
	target := param("TableTargetUtilization", &awscdk.CfnParameterProps{Type: jsii.String("Number"), Default: jsii.String("70"),
		MinValue: jsii.Number(20), MaxValue: jsii.Number(90),
		Description: jsii.String("With TableCapacityMode provisioned, the share (percent) of the provisioned capacity that auto scaling keeps in use, on the table and on each index.")})
	provisioned := awscdk.NewCfnCondition(s.stack, jsii.String(tableProvisioned), &awscdk.CfnConditionProps{
		Expression: awscdk.Fn_ConditionEquals(mode.ValueAsString(), jsii.String("provisioned"))})

	// The table (an L2 construct, on demand) through its CloudFormation
	// resource: the mode and the starting capacity of the table and each
	// index, AWS::NoValue on demand.
	table := s.table.Node().DefaultChild().(awsdynamodb.CfnTable)
	table.AddPropertyOverride(jsii.String("BillingMode"), awscdk.Fn_ConditionIf(jsii.String(tableProvisioned), "PROVISIONED", "PAY_PER_REQUEST"))
	throughput := awscdk.Fn_ConditionIf(jsii.String(tableProvisioned),
		map[string]any{"ReadCapacityUnits": minRead.ValueAsNumber(), "WriteCapacityUnits": minWrite.ValueAsNumber()},
		awscdk.Aws_NO_VALUE())
	table.AddPropertyOverride(jsii.String("ProvisionedThroughput"), throughput)
	for _, i := range []string{"0", "1"} { // gsi1, gsi2
		table.AddPropertyOverride(jsii.String("GlobalSecondaryIndexes."+i+".ProvisionedThroughput"), throughput)
	}

	// Auto scaling: a scalable target and a target-tracking policy for
	// each capacity of the table and of each index. No role: Application
	// Auto Scaling uses (and creates, the first time) its service-linked
	// role for DynamoDB.
	for _, r := range []struct{ name, resource, kind string }{
		{"Table", "table/${Table}", "table"},
		{"Gsi1", "table/${Table}/index/gsi1", "index"},
		{"Gsi2", "table/${Table}/index/gsi2", "index"},
	} {
		for _, d := range []struct {
			dim      string
			min, max awscdk.CfnParameter
		}{{"Read", minRead, maxRead}, {"Write", minWrite, maxWrite}} {
			id := "TableScaling" + r.name + d.dim
			scalable := awsapplicationautoscaling.NewCfnScalableTarget(s.stack, jsii.String(id+"Target"), &awsapplicationautoscaling.CfnScalableTargetProps{
				ServiceNamespace: jsii.String("dynamodb"), ScalableDimension: jsii.String("dynamodb:" + r.kind + ":" + d.dim + "CapacityUnits"),
				ResourceId:  awscdk.Fn_Sub(jsii.String(r.resource), nil),
				MinCapacity: d.min.ValueAsNumber(), MaxCapacity: d.max.ValueAsNumber(),
			})
			scalable.OverrideLogicalId(jsii.String(id + "Target"))
			scalable.CfnOptions().SetCondition(provisioned)
			policy := awsapplicationautoscaling.NewCfnScalingPolicy(s.stack, jsii.String(id+"Policy"), &awsapplicationautoscaling.CfnScalingPolicyProps{
				PolicyName:      awscdk.Fn_Sub(jsii.String("${AWS::StackName}-"+strings.ToLower(r.name)+"-"+strings.ToLower(d.dim)), nil),
				PolicyType:      jsii.String("TargetTrackingScaling"),
				ScalingTargetId: scalable.Ref(),
				TargetTrackingScalingPolicyConfiguration: &awsapplicationautoscaling.CfnScalingPolicy_TargetTrackingScalingPolicyConfigurationProperty{
					TargetValue: target.ValueAsNumber(),
					PredefinedMetricSpecification: &awsapplicationautoscaling.CfnScalingPolicy_PredefinedMetricSpecificationProperty{
						PredefinedMetricType: jsii.String("DynamoDB" + d.dim + "CapacityUtilization")},
				},
			})
			policy.OverrideLogicalId(jsii.String(id + "Policy"))
			policy.CfnOptions().SetCondition(provisioned)
		}
	}
}
