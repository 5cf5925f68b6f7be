package localdynamo

import "github.com/botforge/platform/shared/writelane"

// aside is a write of a lane (shared/writelane): its caller goes on once
// the write is visible (visible), the fsync still under way; the lane's
// reads do not wait for that fsync (inflight.wait). Everyone else's reads
// still do: nothing not yet durable is answered to anyone but the lane.
// What makes that safe for the lane: the WAL is one ordered log, and a
// batch is visible only once every batch before it is (Pebble publishes
// sequence numbers in order), so a write the lane makes after going on is
// durable only with this one; a crash loses this write only with all that
// came after it (TestLaneReadsPastItsOwnWrite).
type aside struct {
	lane    *writelane.Lane
	visible func()
}
