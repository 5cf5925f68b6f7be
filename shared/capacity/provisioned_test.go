package capacity_test

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/botforge/platform/shared/capacity"
	"github.com/botforge/platform/shared/localdynamo"
)

// TestProvisionedDynamo: DynamoDB's cost per million messages with the
// table provisioned, at $0.00065 per WCU-hour and $0.00013 per RCU-hour:
// units per million messages / utilization x hourly price / 3,600.
func TestProvisionedDynamo(t *testing.T) {
	for _, c := range []struct {
		name        string
		write, read float64 // units per million messages
		utilization float64
		want        float64
	}{
		// 1e6 x 0.00065 / 1 / 3600 = 650 / 3600 = 0.180556: a write unit
		// used every second of the hour it is provisioned.
		{"one write unit a message, fully used", 1e6, 0, 1, 0.1805556},
		// 12e6 x 0.00065 = 7,800; / 0.7 = 11,142.857; / 3600 = 3.095238
		// (on demand: 12 x $0.625 = $7.50).
		{"12 write units a message at 70%", 12e6, 0, 0.7, 3.0952381},
		// 4e6 x 0.00013 = 520; / 0.5 = 1,040; / 3600 = 0.288889.
		{"4 read units a message at 50%", 0, 4e6, 0.5, 0.2888889},
		// 10e6 x 0.00065 + 5e6 x 0.00013 = 6,500 + 650 = 7,150; / 0.7 =
		// 10,214.286; / 3600 = 2.837302.
		{"writes and reads at 70%", 10e6, 5e6, 0.7, 2.8373016},
		// At 90%: 7,150 / 0.9 = 7,944.444; / 3600 = 2.206790.
		{"writes and reads at 90%", 10e6, 5e6, 0.9, 2.2067901},
		{"no utilization", 10e6, 5e6, 0, 0},
	} {
		got := capacity.ProvisionedDynamo(c.write, c.read, c.utilization, capacity.OnDemand)
		if math.Abs(got-c.want) > 1e-6 {
			t.Errorf("%s: $%.7f per million messages, want $%.7f", c.name, got, c.want)
		}
	}
	// Break-even: a unit provisioned for an hour costs what 1,040 write
	// (0.00065 / 0.625e-6) or 1,040 read (0.00013 / 0.125e-6) request
	// units on demand cost, i.e. 28.9% of the 3,600 it could serve:
	// provisioned is cheaper above that average utilization.
	for _, u := range []float64{0.28, 0.29} {
		prov := capacity.ProvisionedDynamo(1e6, 1e6, u, capacity.OnDemand)
		onDemand := capacity.OnDemand.DynamoWriteMillion + capacity.OnDemand.DynamoReadMillion
		if cheaper := prov < onDemand; cheaper != (u > 0.289) {
			t.Errorf("at %.0f%%: provisioned $%.4f, on demand $%.4f", u*100, prov, onDemand)
		}
	}
	for u, ok := range map[float64]bool{0.19: false, 0.2: true, 0.7: true, 0.9: true, 0.91: false} {
		if capacity.ValidUtilization(u) != ok {
			t.Errorf("ValidUtilization(%v) = %v", u, !ok)
		}
	}
}

// TestModelProvisioned: the model prices the units it counted both ways,
// the sweep's reads included, and prints both totals with the assumption.
func TestModelProvisioned(t *testing.T) {
	c := capacity.Counted{
		Shape: capacity.Shape{Bots: 1, Conversations: 1, Turns: 50}, Messages: 100, Deliveries: 100, APICalls: 100,
		Usage: localdynamo.Usage{
			Partitions: map[localdynamo.Partition]localdynamo.Units{
				{Table: "platform", Key: "MSG#a"}:                 {Write: 800, Read: 400},
				{Table: "platform", Index: "gsi1", Key: "CONV#a"}: {Write: 400},
			},
			Operations: map[string]localdynamo.Units{"TransactWriteItems": {Write: 1200}, "GetItem": {Read: 400}},
		},
	}
	load := capacity.Load{MessagesPerSecond: 1000, Bots: 1, Conversations: 1}
	for _, tc := range []struct {
		utilization                 float64
		wantProvisioned, wantDemand float64
	}{
		// 12 write and 4 read units a message; the sweep's 32 read units
		// a minute at 1,000 messages/s: 32/60/1000 x 1e6 = 533.33 read
		// units per million. Provisioned: 12e6 x 0.00065 + 4,000,533.33 x
		// 0.00013 = 7,800 + 520.0693 = 8,320.0693; / 0.7 / 3600 = 3.301615.
		// On demand: 12 x 0.625 + 4.000533 x 0.125 = 7.5 + 0.500067.
		{0.7, 3.3016148, 8.0000667},
		// / 0.9 / 3600 = 2.567922.
		{0.9, 2.5679226, 8.0000667},
	} {
		a := capacity.DefaultAssumptions
		a.Utilization = tc.utilization
		e := capacity.Model(c, load, a, capacity.OnDemand)
		if math.Abs(e.ProvisionedDynamoDB-tc.wantProvisioned) > 1e-6 || math.Abs(e.CostPerMillion["DynamoDB"]-tc.wantDemand) > 1e-6 {
			t.Errorf("at %.0f%%: DynamoDB $%.7f provisioned, $%.7f on demand; want $%.7f, $%.7f",
				tc.utilization*100, e.ProvisionedDynamoDB, e.CostPerMillion["DynamoDB"], tc.wantProvisioned, tc.wantDemand)
		}
		var out bytes.Buffer
		e.Print(&out)
		for _, want := range []string{
			"(on-demand, us-east-1)",
			"target utilization, us-east-1: DynamoDB $",
			"steady load at 1000 messages/s",
			"a spiky load is provisioned for its peaks and pays more",
		} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("the estimate does not say %q:\n%s", want, out.String())
			}
		}
	}
}
