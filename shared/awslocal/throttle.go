package awslocal

import (
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"
)

// API Gateway's default route throttling (the HTTP API's
// DefaultRouteSettings: ThrottlingRateLimit, ThrottlingBurstLimit; the
// stack's ApiThrottlingRateLimit and ApiThrottlingBurstLimit): a token
// bucket over every route together, refilled at the rate, holding the
// burst; a request finding it empty is answered 429 at the edge, and no
// function runs.

type tokenBucket struct {
	mu          sync.Mutex
	rate, burst float64
	tokens      float64
	last        time.Time
	now         func() time.Time
}

func newTokenBucket(rate, burst float64) *tokenBucket {
	return &tokenBucket{rate: rate, burst: burst, tokens: burst, now: time.Now}
}

// allow takes a token, if there is one.
func (b *tokenBucket) allow() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	if !b.last.IsZero() {
		b.tokens = math.Min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	}
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// apiThrottle is the template's default route throttling, nil for none:
// the HTTP API's (SAM) or its stage's (the CDK app's) DefaultRouteSettings.
func (t *Template) apiThrottle() *tokenBucket {
	for _, r := range t.resources {
		if r["Type"] != "AWS::Serverless::HttpApi" && r["Type"] != "AWS::ApiGatewayV2::Stage" {
			continue
		}
		props, _ := r["Properties"].(map[string]any)
		s, _ := props["DefaultRouteSettings"].(map[string]any)
		if s == nil {
			continue
		}
		number := func(k string) (float64, bool) {
			v, err := t.resolve(s[k])
			if err != nil || v == nil {
				return 0, false
			}
			f, err := strconv.ParseFloat(fmt.Sprint(v), 64)
			return f, err == nil && f > 0
		}
		rate, okR := number("ThrottlingRateLimit")
		burst, okB := number("ThrottlingBurstLimit")
		if okR && okB {
			return newTokenBucket(rate, burst)
		}
	}
	return nil
}
