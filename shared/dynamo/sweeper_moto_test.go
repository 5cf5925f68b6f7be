package dynamo_test

import (
	"context"
	"testing"

	"github.com/botforge/platform/shared/dynamo"
)

// TestSweeperRunOnMoto: the scheduled sweep's query of every pending
// deletion runs on moto_server, which checks key conditions as DynamoDB
// does (an empty string in a key condition is refused there, and was the
// sweep's "every marker" prefix).
func TestSweeperRunOnMoto(t *testing.T) {
	w := &dynamo.Sweeper{Store: motoStore(t, "sweep")}
	if n, err := w.Run(context.Background()); err != nil || n != 0 {
		t.Fatalf("Run with nothing pending = %d, %v", n, err)
	}
}
