package awslocal

import (
	"errors"
	"fmt"
	"sync"
)

// Lambda's concurrency, modelled: an account has a regional concurrency
// (AWS's default 1,000 concurrent executions); a function with reserved
// concurrency (ReservedConcurrentExecutions) runs at most that many
// invocations at once and takes them out of the account's pool; every
// other function shares what is left (the unreserved pool, of which AWS
// keeps at least 100 free of reservations). An invocation beyond its
// function's limit is throttled at once: Lambda does not queue a
// synchronous invocation. What the caller sees depends on the caller:
// a function URL answers 429 (functionurl.go), API Gateway 503 (apigw.go),
// an event source mapping or an asynchronous invocation retries
// (lambdaFunction.Invoke).

// AWS's defaults, and aws-local's: the account's concurrency scaled down
// by ten (one machine, not a region), the unreserved minimum with it.
const (
	AWSAccountConcurrency     = 1000
	AWSMinUnreserved          = 100
	DefaultAccountConcurrency = AWSAccountConcurrency / 10
)

// errThrottled is a throttled invocation (Lambda's TooManyRequestsException,
// "Rate Exceeded.").
var errThrottled = errors.New("Rate Exceeded.")

// account counts the invocations in flight against the account's
// concurrency.
type account struct {
	limit    int // the account's concurrency
	reserved int // the sum of the functions' reservations

	mu         sync.Mutex
	unreserved int // in flight of functions without a reservation
	throttles  map[string]int
}

// newAccount checks the reservations as Lambda does when they are set: a
// reservation may not leave less than the minimum unreserved (AWS's 100,
// scaled as the account is).
func newAccount(limit int, funcs []*Function) (*account, error) {
	a := &account{limit: limit, throttles: map[string]int{}}
	for _, f := range funcs {
		if f.Reserved >= 0 {
			a.reserved += f.Reserved
		}
	}
	if min := minUnreserved(limit); limit-a.reserved < min {
		return nil, fmt.Errorf("the functions' ReservedConcurrentExecutions (%d in all) decrease the account's UnreservedConcurrentExecution (concurrency %d) below its minimum value of [%d]",
			a.reserved, limit, min)
	}
	return a, nil
}

// minUnreserved is AWS's 100 of 1,000, in proportion.
func minUnreserved(limit int) int {
	return (limit*AWSMinUnreserved + AWSAccountConcurrency - 1) / AWSAccountConcurrency
}

// scaleReserved scales a reservation written for AWS's default account to
// an account of limit (rounded up: a reservation stays at least 1).
func scaleReserved(reserved, limit int) int {
	if reserved <= 0 {
		return reserved
	}
	return (reserved*limit + AWSAccountConcurrency - 1) / AWSAccountConcurrency
}

// acquire takes one concurrent execution for l, or errThrottled.
func (a *account) acquire(l *lambdaFunction) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if l.fn.Reserved >= 0 {
		if l.inFlight >= l.fn.Reserved {
			a.throttles[l.fn.LogicalID]++
			return errThrottled
		}
	} else {
		if a.unreserved >= a.limit-a.reserved {
			a.throttles[l.fn.LogicalID]++
			return errThrottled
		}
		a.unreserved++
	}
	l.inFlight++
	return nil
}

// release gives back an execution acquire took.
func (a *account) release(l *lambdaFunction) {
	a.mu.Lock()
	defer a.mu.Unlock()
	l.inFlight--
	if l.fn.Reserved < 0 {
		a.unreserved--
	}
}

// Throttles are the throttled invocations so far, by function.
func (a *account) Throttles() map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string]int{}
	for k, v := range a.throttles {
		out[k] = v
	}
	return out
}
