package dynamo

import "testing"

// A bot's counters spread over the month's shards when no quota holds
// them to one, so a bot's concurrent messages do not wait on one item;
// a quota's exact count is on shard 0 (countUsage).
func TestUsageAddSpreadsOverShards(t *testing.T) {
	keys := map[string]bool{}
	for range 200 {
		u := usageAdd("bot_1", UsageMessages, 1).Update
		keys[getS(u.Key, attrSK)] = true
		if u.ConditionExpression != nil {
			t.Fatal("an ADD without a quota has a condition")
		}
	}
	if len(keys) < usageShards/2 {
		t.Fatalf("200 ADDs used %d keys of %d shards", len(keys), usageShards)
	}
	if k := getS(usageAdd("bot_1", UsageStorage, 5).Update.Key, attrSK); k != usageTotalSK {
		t.Fatalf("storage counted on %q, want the unsharded %q", k, usageTotalSK)
	}
}
