package runtime

import (
	"context"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/lambdarunner"
	"github.com/botforge/platform/shared/platform"
)

// CodeEnv configures the AWS code runner (deployed code: one Lambda
// function per bot and per integration version; docs/runtime.md).
type CodeEnv struct {
	// Prefix (PLATFORM_CODE_PREFIX, "<stack>-code-") names the functions and
	// their roles; without it deployed code cannot run on this deployment.
	Prefix string
	// RolePath (PLATFORM_CODE_ROLE_PATH) and BoundaryARN
	// (PLATFORM_CODE_BOUNDARY_ARN) are the IAM path and permissions
	// boundary of the functions' roles, LogsARN (PLATFORM_CODE_LOGS_ARN,
	// "arn:aws:logs:<region>:<account>:log-group:") where their logs go.
	// Set for the admin function only: it alone deploys.
	RolePath, BoundaryARN, LogsARN string
	// MaxReservedConcurrency (PLATFORM_CODE_MAX_RESERVED_CONCURRENCY,
	// default 10) caps the reserved concurrency an integration's
	// maxConcurrency gives its function; 0: none is ever reserved.
	MaxReservedConcurrency int32
	LambdaEndpoint         string // LAMBDA_ENDPOINT: a Lambda endpoint other than AWS's
	IAMEndpoint            string // IAM_ENDPOINT: an IAM endpoint other than AWS's
}

// CodeEnvFromEnv reads CodeEnv from the process environment.
func CodeEnvFromEnv() CodeEnv {
	return CodeEnv{
		Prefix: os.Getenv("PLATFORM_CODE_PREFIX"), RolePath: os.Getenv("PLATFORM_CODE_ROLE_PATH"),
		BoundaryARN: os.Getenv("PLATFORM_CODE_BOUNDARY_ARN"), LogsARN: os.Getenv("PLATFORM_CODE_LOGS_ARN"),
		MaxReservedConcurrency: reservedConcurrencyCap(os.Getenv("PLATFORM_CODE_MAX_RESERVED_CONCURRENCY")),
		LambdaEndpoint:         os.Getenv("LAMBDA_ENDPOINT"), IAMEndpoint: os.Getenv("IAM_ENDPOINT"),
	}
}

// DefaultMaxReservedConcurrency is the cap without
// PLATFORM_CODE_MAX_RESERVED_CONCURRENCY.
const DefaultMaxReservedConcurrency = 10

// reservedConcurrencyCap reads PLATFORM_CODE_MAX_RESERVED_CONCURRENCY: a
// non-negative integer; unset or not one, the default.
func reservedConcurrencyCap(v string) int32 {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
	if err != nil || n < 0 {
		return DefaultMaxReservedConcurrency
	}
	return int32(n)
}

// CodeRunner is the code runner of the environment, or nil when none is
// configured. It deploys (creates and updates functions) only when the
// role path and boundary are set and store and files are given.
func CodeRunner(cfg aws.Config, env Env, ce CodeEnv, store *dynamo.Store, files platform.FileStorage) *lambdarunner.Runner {
	if ce.Prefix == "" {
		return nil
	}
	r := &lambdarunner.Runner{
		Lambda: lambda.NewFromConfig(cfg, func(o *lambda.Options) {
			if ce.LambdaEndpoint != "" {
				o.BaseEndpoint = aws.String(ce.LambdaEndpoint)
			}
		}),
		Prefix: ce.Prefix, RolePath: ce.RolePath, BoundaryARN: ce.BoundaryARN, LogsARN: ce.LogsARN,
		MaxReservedConcurrency: ce.MaxReservedConcurrency,
		BotLogGroup:            env.BotLogGroup, IntegrationLogGroup: env.IntegrationLogGroup,
	}
	if ce.RolePath != "" && ce.BoundaryARN != "" && store != nil && files != nil {
		r.IAM = iam.NewFromConfig(cfg, func(o *iam.Options) {
			if ce.IAMEndpoint != "" {
				o.BaseEndpoint = aws.String(ce.IAMEndpoint)
			}
		})
		r.Source = CodeSource{Store: store, Files: files}
	}
	return r
}

// WithCode is client, able to call deployed code when r is not nil.
func WithCode(r *lambdarunner.Runner, client *http.Client) *http.Client {
	if r == nil {
		return client
	}
	if client == nil {
		client = Outbound()
	}
	return r.Client(client)
}

// codeKeyNote marks the API keys minted for deployed code's functions.
const codeKeyNote = "deployed code (Lambda function)"

// CodeSource is the deployments' source: bundles from the file storage, a
// bot API key (bp_bak_) for a bot's function, an integration API key
// (bp_iak_) for an integration's, never an account's token. The keys of
// earlier functions of the same bot or integration are revoked once the
// new function holds its key.
type CodeSource struct {
	Store *dynamo.Store
	Files platform.FileStorage
}

// Code reads a bundle.
func (s CodeSource) Code(ctx context.Context, key string) ([]byte, error) {
	rc, _, err := s.Files.Open(ctx, key, "")
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// BotToken mints a bot API key for the bot's function.
func (s CodeSource) BotToken(ctx context.Context, b platform.Bot) (lambdarunner.Key, error) {
	t, err := s.Store.CreateBotAPIKey(ctx, b, codeKeyNote)
	if err != nil {
		return lambdarunner.Key{}, err
	}
	return codeKey(t,
		func(ctx context.Context) ([]platform.TokenInfo, error) { return s.Store.ListBotAPIKeys(ctx, b.ID) },
		func(ctx context.Context, id string) error { return s.Store.DeleteBotAPIKey(ctx, b.WorkspaceID, id) }), nil
}

// IntegrationToken mints an integration API key for the version's function.
func (s CodeSource) IntegrationToken(ctx context.Context, i platform.Integration) (lambdarunner.Key, error) {
	t, err := s.Store.CreateIntegrationAPIKey(ctx, i, codeKeyNote)
	if err != nil {
		return lambdarunner.Key{}, err
	}
	return codeKey(t,
		func(ctx context.Context) ([]platform.TokenInfo, error) {
			return s.Store.ListIntegrationAPIKeys(ctx, i.ID)
		},
		func(ctx context.Context, id string) error {
			return s.Store.DeleteIntegrationAPIKey(ctx, i.WorkspaceID, id)
		}), nil
}

// codeKey is the runner's hold on key t, minted for a function: revoking
// it, or the function's other code keys (list reads the owner's keys, del
// deletes one), runs after the deploy that asked for it, so each gets its
// own context of at most 10s. Both are best effort: a failed delete is
// not reported.
func codeKey(t platform.NewToken, list func(context.Context) ([]platform.TokenInfo, error), del func(ctx context.Context, id string) error) lambdarunner.Key {
	return lambdarunner.Key{Token: t.Value,
		RevokeOthers: func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if old, err := list(ctx); err == nil {
				for _, k := range old {
					if k.Note == codeKeyNote && k.ID != t.ID {
						_ = del(ctx, k.ID)
					}
				}
			}
		},
		Revoke: func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = del(ctx, t.ID)
		}}
}
