package dynamo

import "context"

// SetReleaseContext makes releases run on ctx (to count their calls).
func (l *Limiter) SetReleaseContext(ctx context.Context) { l.releaseCtx = ctx }
