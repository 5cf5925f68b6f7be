package runtime

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// The operator's cap on deployed code's reserved concurrency reaches the
// runner: PLATFORM_CODE_MAX_RESERVED_CONCURRENCY, default 10, 0 kept.
func TestCodeRunnerReservedConcurrencyCap(t *testing.T) {
	t.Setenv("PLATFORM_CODE_PREFIX", "st-code-")
	for v, want := range map[string]int32{"": 10, "0": 0, "25": 25, "-3": 10, "many": 10} {
		t.Setenv("PLATFORM_CODE_MAX_RESERVED_CONCURRENCY", v)
		if got := CodeRunner(aws.Config{Region: "eu-west-1"}, Env{}, CodeEnvFromEnv(), nil, nil).MaxReservedConcurrency; got != want {
			t.Errorf("PLATFORM_CODE_MAX_RESERVED_CONCURRENCY=%q: cap %d, want %d", v, got, want)
		}
	}
}
