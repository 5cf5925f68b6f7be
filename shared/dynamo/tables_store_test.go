package dynamo_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/platform"
)

// TestDeleteBotTables: a bot's tables and their rows go with it (for
// deleteBot), other bots' stay.
func TestDeleteBotTables(t *testing.T) {
	s := apitest.New(t).Platform.Store
	ctx := context.Background()
	var ids []dynamo.RowSet
	// Rows in one partition (the previous layout) and in shards.
	for i, bot := range []string{"bot_1", "bot_1", "bot_2"} {
		tb := platform.Table{ID: platform.NewID(platform.PrefixTable), Name: "t" + platform.NewID(""), Factor: 1, Schema: json.RawMessage(`{}`)}
		st := platform.TableState{RowShards: i * platform.TableRowShards}
		if err := s.CreateTable(ctx, bot, tb, st, 0, 0, 0); err != nil {
			t.Fatal(err)
		}
		rs := dynamo.RowSet{Table: tb.ID, Shards: st.RowShards}
		if err := s.PutRows(ctx, rs, []platform.TableRow{{ID: 1, Values: map[string]json.RawMessage{}}, {ID: 2, Values: map[string]json.RawMessage{}}}, nil); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, rs)
	}
	if err := s.DeleteBotTables(ctx, "bot_1"); err != nil {
		t.Fatal(err)
	}
	if l, err := s.ListTables(ctx, "bot_1"); err != nil || len(l) != 0 {
		t.Fatalf("tables left: %v %v", l, err)
	}
	for _, rs := range ids[:2] {
		for id := int64(1); id <= 2; id++ {
			if _, ok, err := s.GetRow(ctx, rs, id); err != nil || ok {
				t.Fatalf("a deleted table's row is left: %v %v", ok, err)
			}
		}
	}
	if l, err := s.ListTables(ctx, "bot_2"); err != nil || len(l) != 1 {
		t.Fatalf("another bot's tables: %v %v", l, err)
	}
	if _, ok, err := s.GetRow(ctx, ids[2], 1); err != nil || !ok {
		t.Fatalf("another bot's row: %v %v", ok, err)
	}
}
