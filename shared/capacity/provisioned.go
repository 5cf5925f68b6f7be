package capacity

import (
	"fmt"
	"io"
)

// ProvisionedDynamo is DynamoDB's cost per million messages with the
// table in provisioned capacity mode under auto scaling (the stack's
// TableCapacityMode provisioned): writeUnits and readUnits are the
// capacity units a million messages take (base table and indexes alike:
// each index is provisioned and scaled on its own, and the sum of their
// provisioned units is the sum of their used units over utilization).
//
// At a steady rate r messages/s, the units used per second are
// units/1e6*r; auto scaling provisions that over utilization; an hour of
// it costs units/1e6*r/utilization*hourly and carries r*3600 messages.
// Per million messages: units/utilization*hourly/3600, whatever r.
//
// It assumes a steady load: a load with peaks is provisioned for its
// peaks (auto scaling follows within minutes, scales in more slowly, and
// a burst above the provisioned units is throttled until it catches up),
// so it pays more; and the stack's minimum capacity per table and index
// is a floor at low rates, not modelled here.
func ProvisionedDynamo(writeUnits, readUnits, utilization float64, pr Prices) float64 {
	if utilization <= 0 {
		return 0
	}
	return (writeUnits*pr.DynamoWCUHour + readUnits*pr.DynamoRCUHour) / utilization / 3600
}

// ValidUtilization tells whether u is a target utilization auto scaling
// accepts (20% to 90%).
func ValidUtilization(u float64) bool { return u >= 0.2 && u <= 0.9 }

// printProvisioned writes the total per million messages with the table
// provisioned, next to the on-demand total (total, on demand).
func (e Estimate) printProvisioned(w io.Writer, total float64) {
	u := e.Assumptions.Utilization
	if u <= 0 {
		return
	}
	prov := total - e.CostPerMillion["DynamoDB"] + e.ProvisionedDynamoDB
	fmt.Fprintf(w, "  %-16s $%8.2f per million messages; $%.0f a month at %.0f messages/s (the table provisioned at %.0f%% target utilization, us-east-1: DynamoDB $%.2f of it instead of $%.2f)\n",
		"total", prov, prov*e.Load.MessagesPerSecond*secondsPerMonth/1e6, e.Load.MessagesPerSecond, u*100, e.ProvisionedDynamoDB, e.CostPerMillion["DynamoDB"])
	fmt.Fprintf(w, "  (provisioned assumes a steady load at %.0f messages/s, auto scaling keeping the table and each index at %.0f%% of what is provisioned: a spiky load is provisioned for its peaks and pays more, a burst above the provisioned units is throttled until auto scaling catches up, within minutes; -utilization sets the target, docs/deploy.md \"Table capacity mode\")\n",
		e.Load.MessagesPerSecond, u*100)
}
