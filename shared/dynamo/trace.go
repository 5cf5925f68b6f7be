package dynamo

import (
	"context"
	"encoding/json"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/platform"
	"github.com/botforge/platform/shared/tracing"
)

// stampTrace writes the trace of ctx (the request's) into the outbox
// entries a transaction puts, so that their delivery continues it
// (platform.Delivery.Trace; shared/tracing).
func stampTrace(ctx context.Context, items []types.TransactWriteItem) {
	var tp string
	for _, w := range items {
		if w.Put == nil {
			continue
		}
		pk, ok := w.Put.Item[attrPK].(*types.AttributeValueMemberS)
		if !ok || !IsShard(pk.Value) {
			continue
		}
		doc, ok := w.Put.Item[attrDoc].(*types.AttributeValueMemberS)
		if !ok {
			continue
		}
		if tp == "" {
			if tp = tracing.Parent(ctx); tp == "" {
				return
			}
		}
		var d platform.Delivery
		if json.Unmarshal([]byte(doc.Value), &d) != nil || d.Trace != "" {
			continue
		}
		d.Trace = tp
		if b, err := json.Marshal(d); err == nil {
			w.Put.Item[attrDoc] = str(string(b))
		}
	}
}
