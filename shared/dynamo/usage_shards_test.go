package dynamo

import "testing"

// A bot's counters spread over partition keys of their own when no quota
// holds them to one (usageKeys), so a bot's concurrent messages neither
// wait on one item nor heat one key; a quota's exact count is on shard 0
// of USAGE#<bot> (countUsage).
func TestUsageAddSpreadsOverShards(t *testing.T) {
	if quotasOn.Load() {
		t.Skip("a quota was set in this process: counts stay on USAGE#<bot>")
	}
	keys := map[string]bool{}
	for range 200 {
		u := usageAdd("bot_1", UsageMessages, 1).Update
		if pk := getS(u.Key, attrPK); pk == usagePK("bot_1") {
			t.Fatalf("counted on %s, the unspread key", pk)
		}
		keys[getS(u.Key, attrPK)] = true
		if u.ConditionExpression != nil {
			t.Fatal("an ADD without a quota has a condition")
		}
	}
	if len(keys) < usageKeys/2 {
		t.Fatalf("200 ADDs used %d keys of %d", len(keys), usageKeys)
	}
	if k := getS(usageAdd("bot_1", UsageStorage, 5).Update.Key, attrSK); k != usageTotalSK {
		t.Fatalf("storage counted on %q, want the unsharded %q", k, usageTotalSK)
	}
}
