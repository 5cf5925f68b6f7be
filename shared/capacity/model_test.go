package capacity_test

import (
	"math"
	"testing"

	"github.com/botforge/platform/shared/capacity"
	"github.com/botforge/platform/shared/localdynamo"
)

func TestPattern(t *testing.T) {
	for key, want := range map[string]string{
		"OUTBOX#bot_01M8DHHQ73DC2J1K7Y8YERDDEZ#conv_01M8DHHQ6DT2T9327YWAA0RGP3": "OUTBOX#<bot>#<conv>",
		"OUTBOX#DUE#17":                           "OUTBOX#DUE#<n>",
		"USAGE#bot_01M8DHHQ73DC2J1K7Y8YERDDEZ":    "USAGE#<bot>",
		"DELETIONS":                               "DELETIONS",
		"BOT#bot_01M8DHHQ73DC2J1K7Y8YERDDEZ#EVTS": "BOT#<bot>#EVTS",
		"TOKEN#83c98f108fbddec74e19be48443a111936a5ebeaee9eacd697fed3c594085dde": "TOKEN#<hash>",
	} {
		if got := capacity.Pattern(key); got != want {
			t.Errorf("Pattern(%q) = %q, want %q", key, got, want)
		}
	}
}

// TestModel: ceilings, scaling and costs follow from the units counted.
func TestModel(t *testing.T) {
	const b, c1, c2 = "bot_01M8DHHQ73DC2J1K7Y8YERDDEZ", "conv_01M8DHHQ6DT2T9327YWAA0RGP3", "conv_01M8DHHQ6439N5ZPJATKA424HH"
	part := func(index, key string) localdynamo.Partition {
		return localdynamo.Partition{Table: "platform", Index: index, Key: key}
	}
	c := capacity.Counted{
		Shape: capacity.Shape{Bots: 1, Conversations: 2, Turns: 50}, Messages: 200, Deliveries: 200, APICalls: 200,
		Usage: localdynamo.Usage{
			Partitions: map[localdynamo.Partition]localdynamo.Units{
				part("", "OUTBOX#"+b+"#"+c1): {Write: 400},
				part("", "OUTBOX#"+b+"#"+c2): {Write: 400},
				part("", "USAGE#"+b):         {Write: 500},
				part("gsi1", "OUTBOX#DUE#3"): {Write: 600, Read: 10},
				part("", "TOKEN#abc"):        {Read: 200},
			},
			Operations: map[string]localdynamo.Units{"TransactWriteItems": {Write: 1900}, "Query": {Read: 210}},
		},
	}
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-6*math.Max(1, want) {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	// The load has the replay's shape: no scaling.
	e := capacity.Model(c, capacity.Load{MessagesPerSecond: 100, Bots: 1, Conversations: 2}, capacity.DefaultAssumptions, capacity.OnDemand)
	near("write units per message", e.WritePerMessage, 9.5)
	near("read units per message (sweep apart)", e.ReadPerMessage, 1)
	// Hottest for writes: the sweep bucket, 3 units a message.
	near("ceiling", e.Ceiling, 1000.0/3)
	if e.Hottest != "gsi1 OUTBOX#DUE#<n>" {
		t.Errorf("hottest key %q", e.Hottest)
	}
	near("read ceiling", e.ReadCeiling, 3000)
	near("ceiling with one outbox key", e.CeilingOneOutbox, 1000.0/4)
	near("DynamoDB per million", e.CostPerMillion["DynamoDB"], 9.5*0.625+1*0.125+32.0/60/100*0.125)
	near("dispatcher concurrency", e.DispatcherConcurrency, 100*0.2)
	// 1,000 conversations and 10 bots: one conversation's (one bot's)
	// key takes its share of the traffic.
	e = capacity.Model(c, capacity.Load{MessagesPerSecond: 100, Bots: 10, Conversations: 1000}, capacity.DefaultAssumptions, capacity.OnDemand)
	for _, k := range e.Keys {
		switch k.Pattern {
		case "OUTBOX#<bot>#<conv>":
			near("peak WCU of a conversation's shard", k.PeakWCU, 400.0/200*100*2/1000)
		case "USAGE#<bot>":
			near("peak WCU of a bot's usage", k.PeakWCU, 500.0/200*100/10)
		}
	}
}
