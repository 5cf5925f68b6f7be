package platform

import (
	"context"
	"time"
)

// A Scope is one limit that every process of the platform counts alike
// (on AWS every function and execution environment): the table holds it.
type Scope struct {
	// Key names what is counted, unique across the platform, e.g.
	// "streams/key/<webhookId>/<fid>".
	Key string
	// Max is how many are allowed (slots held at once, or events per
	// window); <= 0: no limit.
	Max int64
	// Refusal is the message of the RateLimited error answered when the
	// scope is full: it says which limit (by address, by key...).
	Refusal string
}

// SharedLimits count limits across the whole platform.
type SharedLimits interface {
	// Count counts one event in each scope's current fixed window of
	// length window, all or none: a scope at its max refuses (RateLimited,
	// the scope's Refusal) and nothing is counted.
	Count(ctx context.Context, window time.Duration, scopes ...Scope) error
	// Hold takes one slot in each scope, all or none (refused like
	// Count), until release is called. A holder that dies without
	// releasing loses its slots once it is known dead (its process
	// stopped saying it lives), when a Hold needs them.
	Hold(ctx context.Context, scopes ...Scope) (release func(), err error)
}
