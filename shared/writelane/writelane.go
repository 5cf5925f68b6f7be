// Package writelane lets one sequential worker of the local platform (a
// dispatcher's shard goroutine) go on as soon as a write of its own is
// visible in the embedded DynamoDB (shared/localdynamo), while the write's
// fsync is still under way, and read past that fsync.
//
// The embedded store answers a write once it is durable, and a read waits
// for the writes in flight where it reads, so that nothing not yet durable
// is ever answered. A lane relaxes that for its own writes only: a write
// made under Writing calls visible once every later read sees it, before
// its fsync (the embedded store does so for DeleteItem), and a read made
// under the same lane does not wait for the fsyncs of the lane's writes
// (it still waits for everyone else's). The caller takes on what that
// means after a crash: such a write may be lost, and then so is everything
// written after it (the store's log is ordered: nothing later is kept
// without it). The dispatcher uses it for the removal of a delivered
// outbox entry only (docs/runtime.md, "Cut since (lat36)").
//
// Elsewhere (DynamoDB, another emulator) the context values reach no
// store: a write is simply answered once done, and visible is not called.
package writelane

import "context"

// Lane is one sequential worker's identity; compared by address.
type Lane struct{ _ byte }

// New returns a new lane.
func New() *Lane { return new(Lane) }

type key struct{}

type value struct {
	lane    *Lane
	visible func()
}

// Reading marks the reads made under ctx as the lane's: they do not wait
// for the fsyncs of the lane's writes in flight.
func Reading(ctx context.Context, l *Lane) context.Context {
	return context.WithValue(ctx, key{}, value{lane: l})
}

// Writing marks a write made under ctx as the lane's: the store calls
// visible once it is visible to every read, before its fsync ends (and
// answers the write once it is durable, as ever). Reads under ctx are the
// lane's too.
func Writing(ctx context.Context, l *Lane, visible func()) context.Context {
	return context.WithValue(ctx, key{}, value{lane: l, visible: visible})
}

// From returns the lane of ctx (nil for none) and, for a write marked by
// Writing, the function to call once it is visible.
func From(ctx context.Context) (*Lane, func()) {
	v, _ := ctx.Value(key{}).(value)
	return v.lane, v.visible
}
