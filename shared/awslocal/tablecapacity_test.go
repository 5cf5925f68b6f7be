package awslocal

import (
	"fmt"
	"sort"
	"strings"
	"testing"
)

// TestTableCapacityModeTemplate: TableCapacityMode selects the table's
// capacity mode (docs/deploy.md "Table capacity mode"). By default the
// table is on demand and the stack has no auto scaling; with provisioned,
// the table and both indexes start at the minimum capacity and each of
// their read and write capacities has a scalable target (between the
// minimum and maximum parameters) with a target-tracking policy on
// DynamoDB's utilization metric at TableTargetUtilization.
func TestTableCapacityModeTemplate(t *testing.T) {
	scaling := func(tpl *Template) []string {
		var ids []string
		for id := range tpl.resources {
			if strings.HasPrefix(tpl.typeOf(id), "AWS::ApplicationAutoScaling::") && strings.HasPrefix(id, "Table") {
				ids = append(ids, id)
			}
		}
		sort.Strings(ids)
		return ids
	}
	throughput := func(tpl *Template, props map[string]any) (string, error) {
		v, err := tpl.resolve(props["ProvisionedThroughput"])
		if err != nil {
			return "", err
		}
		m, _ := v.(map[string]any)
		return fmt.Sprintf("read %v write %v", m["ReadCapacityUnits"], m["WriteCapacityUnits"]), nil
	}

	def, err := ReadTemplate("../../template.yaml", "../../Makefile", map[string]string{"PagingKey": "00"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if ids := scaling(def); len(ids) != 0 {
		t.Errorf("on demand (the default): auto scaling resources %v", ids)
	}
	table := def.props("Table")
	if mode, err := def.str(table["BillingMode"]); err != nil || mode != "PAY_PER_REQUEST" {
		t.Errorf("on demand: BillingMode %q (%v)", mode, err)
	}
	// On demand, the provisioned throughput is AWS::NoValue: absent.
	for _, where := range []any{table["ProvisionedThroughput"], indexes(def)["gsi1"], indexes(def)["gsi2"]} {
		f, _ := where.(map[string]any)["Fn::If"].([]any)
		if len(f) != 3 || fmt.Sprint(f[2]) != "map[Ref:AWS::NoValue]" {
			t.Errorf("on demand: provisioned throughput %v, want AWS::NoValue", where)
		}
		if on, err := def.Condition(fmt.Sprint(f[0])); err != nil || on {
			t.Errorf("on demand: condition %v is %v (%v)", f[0], on, err)
		}
	}

	prov, err := ReadTemplate("../../template.yaml", "../../Makefile", map[string]string{"PagingKey": "00",
		"TableCapacityMode": "provisioned", "TableMinReadCapacity": "7", "TableMaxWriteCapacity": "900", "TableTargetUtilization": "60"}, "")
	if err != nil {
		t.Fatal(err)
	}
	table = prov.props("Table")
	if mode, err := prov.str(table["BillingMode"]); err != nil || mode != "PROVISIONED" {
		t.Errorf("provisioned: BillingMode %q (%v)", mode, err)
	}
	for name, props := range map[string]map[string]any{"table": table, "gsi1": indexProps(prov, "gsi1"), "gsi2": indexProps(prov, "gsi2")} {
		if got, err := throughput(prov, props); err != nil || got != "read 7 write 5" {
			t.Errorf("provisioned: %s's throughput %q (%v), want the minimum (read 7 write 5)", name, got, err)
		}
	}
	// Each of the table's and the indexes' capacities: a target and its
	// policy.
	want := map[string]string{}
	for _, r := range []string{"table/" + prov.TableName + "/", "table/" + prov.TableName + "/index/gsi1", "table/" + prov.TableName + "/index/gsi2"} {
		kind := "index"
		if !strings.Contains(r, "/index/") {
			kind = "table"
		}
		for _, d := range []string{"Read", "Write"} {
			min, max := "7", "40000"
			if d == "Write" {
				min, max = "5", "900"
			}
			want[strings.TrimSuffix(r, "/")+" dynamodb:"+kind+":"+d+"CapacityUnits"] = fmt.Sprintf("min %s max %s, DynamoDB%sCapacityUtilization at 60", min, max, d)
		}
	}
	got := map[string]string{}
	ids := scaling(prov)
	for _, id := range ids {
		if prov.typeOf(id) != "AWS::ApplicationAutoScaling::ScalableTarget" {
			continue
		}
		p, err := prov.resolve(prov.props(id))
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		pm := p.(map[string]any)
		if pm["ServiceNamespace"] != "dynamodb" {
			t.Errorf("%s: namespace %v", id, pm["ServiceNamespace"])
		}
		// Its policy: the one whose ScalingTargetId names it.
		policy := ""
		for _, pid := range ids {
			pp := prov.props(pid)
			if ref, _ := pp["ScalingTargetId"].(map[string]any); ref != nil && ref["Ref"] == id {
				r, err := prov.resolve(pp)
				if err != nil {
					t.Fatalf("%s: %v", pid, err)
				}
				rm := r.(map[string]any)
				c := rm["TargetTrackingScalingPolicyConfiguration"].(map[string]any)
				metric := c["PredefinedMetricSpecification"].(map[string]any)["PredefinedMetricType"]
				policy = fmt.Sprintf("%v at %v", metric, c["TargetValue"])
				if rm["PolicyType"] != "TargetTrackingScaling" {
					t.Errorf("%s: policy type %v", pid, rm["PolicyType"])
				}
			}
		}
		got[fmt.Sprintf("%v %v", pm["ResourceId"], pm["ScalableDimension"])] = fmt.Sprintf("min %v max %v, %s", pm["MinCapacity"], pm["MaxCapacity"], policy)
	}
	if len(ids) != 12 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("provisioned: %d auto scaling resources %v\ngot  %v\nwant %v", len(ids), ids, got, want)
	}
}

// indexes are the raw ProvisionedThroughput of the table's indexes, by name.
func indexes(tpl *Template) map[string]any {
	out := map[string]any{}
	l, _ := tpl.props("Table")["GlobalSecondaryIndexes"].([]any)
	for _, g := range l {
		gm, _ := g.(map[string]any)
		out[fmt.Sprint(gm["IndexName"])] = gm["ProvisionedThroughput"]
	}
	return out
}

func indexProps(tpl *Template, name string) map[string]any {
	return map[string]any{"ProvisionedThroughput": indexes(tpl)[name]}
}
