// Package runtime builds the platform's handlers and AWS clients from the
// environment: the same wiring serves the Lambda functions and the local
// platform.
package runtime

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/botforge/platform/shared/chatapi"
	"github.com/botforge/platform/shared/chatrelay"
	"github.com/botforge/platform/shared/clientip"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	awsscheduler "github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/botforge/platform/shared/delivery"
	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/embeddings"
	"github.com/botforge/platform/shared/files"
	"github.com/botforge/platform/shared/httpapi"
	"github.com/botforge/platform/shared/hubstd"
	"github.com/botforge/platform/shared/llm"
	"github.com/botforge/platform/shared/logstore"
	"github.com/botforge/platform/shared/platform"
	"github.com/botforge/platform/shared/s3store"
	"github.com/botforge/platform/shared/scheduler"
	"github.com/botforge/platform/shared/sdkhttp"
	"github.com/botforge/platform/shared/signin"
	"github.com/botforge/platform/shared/tracing"
)

// Env is the platform's configuration, read from environment variables
// (documented in README.md).
type Env struct {
	Table          string // PLATFORM_TABLE: the DynamoDB table (default "platform")
	Bucket         string // PLATFORM_BUCKET: the S3 bucket of file contents (default "platform-files")
	DynamoEndpoint string // DYNAMODB_ENDPOINT: a DynamoDB endpoint other than AWS's (e.g. DynamoDB Local)
	S3Endpoint     string // S3_ENDPOINT: an S3 endpoint other than AWS's (e.g. MinIO)
	PagingKey      string // PLATFORM_PAGING_KEY: hex secret signing nextTokens, shared by every function
	// CORSOrigins: PLATFORM_CORS_ORIGINS, the browser origins allowed to call
	// the API (comma-separated; "http://localhost:*" any port; "*" any
	// origin). Unset: none in Lambda, this machine's pages locally.
	CORSOrigins string
	// TrustedProxies: PLATFORM_TRUSTED_PROXIES, the proxies (CIDRs,
	// comma-separated) whose X-Forwarded-For is believed, e.g. a CloudFront
	// or load balancer in front of API Gateway (shared/clientip). Unset:
	// the client's address is the event's sourceIp.
	TrustedProxies string
	// ChatStreamURL: PLATFORM_CHAT_STREAM_URL, the public base of the Chat
	// API's streams when another host serves them (on AWS the stack's
	// ChatStreamUrl, set in the chat function): the hosted webchat page
	// listens there. Unset: this API.
	ChatStreamURL string
	// PublicURL: PLATFORM_PUBLIC_URL, the API's public base (on AWS the
	// custom domain's https://<DomainName>, else the API's endpoint): the
	// dispatcher's webhook URLs (<it>/webhooks/<id>). Unset: none known.
	PublicURL string

	// Recurring events on EventBridge Scheduler (AWS). Without a target ARN
	// no schedules are made (the local platform runs its own scheduler).
	ScheduleGroup      string // PLATFORM_SCHEDULE_GROUP: the schedule group (default "platform")
	SchedulerTargetARN string // PLATFORM_SCHEDULER_TARGET_ARN: the scheduler function's ARN
	SchedulerRoleARN   string // PLATFORM_SCHEDULER_ROLE_ARN: the role EventBridge Scheduler assumes to invoke it
	SchedulerEndpoint  string // SCHEDULER_ENDPOINT: an EventBridge Scheduler endpoint other than AWS's

	// Bot and integration logs on CloudWatch Logs (AWS; docs/logs.md).
	BotLogGroup         string // PLATFORM_BOT_LOG_GROUP: log group of bot logs (default "/platform/bots")
	IntegrationLogGroup string // PLATFORM_INTEGRATION_LOG_GROUP: log group of integration logs (default "/platform/integrations")
	LogsEndpoint        string // LOGS_ENDPOINT: a CloudWatch Logs endpoint other than AWS's

	// The operator's quotas per bot (docs/account.md; "" or "0": none).
	QuotaMessages    string // BP_QUOTA_MESSAGES_PER_MONTH
	QuotaEvents      string // BP_QUOTA_EVENTS_PER_MONTH
	QuotaInvocations string // BP_QUOTA_INVOCATIONS_PER_MONTH
	QuotaStorage     string // BP_QUOTA_STORAGE_BYTES
	QuotaLLMTokens   string // BP_QUOTA_LLM_TOKENS_PER_MONTH

	// OutboxSweepIndex: PLATFORM_OUTBOX_SWEEP_INDEX, the outbox's sweep
	// index on AWS (the stack's OutboxSweepIndex parameter): "sparse" (the
	// default: an entry due at once is in no index, the table's stream
	// names it) or "full" (every entry indexed, 3 index write units more
	// per delivery). docs/runtime.md, "The sparse sweep index".
	OutboxSweepIndex string
}

// NewStore is the store of a Lambda function of the environment over db
// (every function that writes the outbox builds it so, and so does the
// capacity model's replay of the AWS path): the quotas are the caller's
// to set; the outbox's sweep index is sparse unless OutboxSweepIndex says
// "full".
func NewStore(db *dynamodb.Client, env Env) (*dynamo.Store, error) {
	store := dynamo.New(db, env.Table)
	switch env.OutboxSweepIndex {
	case "", "sparse":
		store.SparseSweepOnStream()
	case "full":
	default:
		return nil, fmt.Errorf("PLATFORM_OUTBOX_SWEEP_INDEX: %q is neither sparse nor full", env.OutboxSweepIndex)
	}
	return store, nil
}

// lambdaStore is NewStore over the environment's DynamoDB, for a Lambda
// function's start (a bad setting stops it).
func lambdaStore(cfg aws.Config, env Env) *dynamo.Store {
	store, err := NewStore(DynamoClient(cfg, env, nil), env)
	if err != nil {
		log.Fatal(err)
	}
	return store
}

// Limits parses the quotas (an invalid value is an error: the process
// refuses to start).
func (e Env) Limits() (dynamo.Limits, error) {
	vals := map[string]string{dynamo.EnvQuotaMessages: e.QuotaMessages, dynamo.EnvQuotaEvents: e.QuotaEvents,
		dynamo.EnvQuotaInvocations: e.QuotaInvocations, dynamo.EnvQuotaStorage: e.QuotaStorage, dynamo.EnvQuotaLLMTokens: e.QuotaLLMTokens}
	return dynamo.ParseLimits(func(k string) string { return vals[k] })
}

// FromEnv reads Env from the process environment.
func FromEnv() Env {
	get := func(k, def string) string {
		if v := os.Getenv(k); v != "" {
			return v
		}
		return def
	}
	return Env{
		Table:          get("PLATFORM_TABLE", "platform"),
		Bucket:         get("PLATFORM_BUCKET", "platform-files"),
		DynamoEndpoint: os.Getenv("DYNAMODB_ENDPOINT"),
		S3Endpoint:     os.Getenv("S3_ENDPOINT"),
		PagingKey:      os.Getenv("PLATFORM_PAGING_KEY"),
		CORSOrigins:    os.Getenv("PLATFORM_CORS_ORIGINS"),
		TrustedProxies: os.Getenv("PLATFORM_TRUSTED_PROXIES"), // clientip.EnvTrustedProxies
		ChatStreamURL:  os.Getenv("PLATFORM_CHAT_STREAM_URL"),
		PublicURL:      os.Getenv("PLATFORM_PUBLIC_URL"),

		ScheduleGroup:      get("PLATFORM_SCHEDULE_GROUP", "platform"),
		SchedulerTargetARN: os.Getenv("PLATFORM_SCHEDULER_TARGET_ARN"),
		SchedulerRoleARN:   os.Getenv("PLATFORM_SCHEDULER_ROLE_ARN"),
		SchedulerEndpoint:  os.Getenv("SCHEDULER_ENDPOINT"),

		BotLogGroup:         get("PLATFORM_BOT_LOG_GROUP", logstore.DefaultBotGroup),
		IntegrationLogGroup: get("PLATFORM_INTEGRATION_LOG_GROUP", logstore.DefaultIntegrationGroup),
		LogsEndpoint:        os.Getenv("LOGS_ENDPOINT"),

		QuotaMessages:    os.Getenv("BP_QUOTA_MESSAGES_PER_MONTH"),
		QuotaEvents:      os.Getenv("BP_QUOTA_EVENTS_PER_MONTH"),
		QuotaInvocations: os.Getenv("BP_QUOTA_INVOCATIONS_PER_MONTH"),
		QuotaStorage:     os.Getenv("BP_QUOTA_STORAGE_BYTES"),
		QuotaLLMTokens:   os.Getenv("BP_QUOTA_LLM_TOKENS_PER_MONTH"),

		OutboxSweepIndex: os.Getenv("PLATFORM_OUTBOX_SWEEP_INDEX"),
	}
}

// PagingKeyBytes decodes the paging key; it must be at least 16 bytes.
func (e Env) PagingKeyBytes() ([]byte, error) {
	k, err := hex.DecodeString(e.PagingKey)
	if err != nil || len(k) < 16 {
		return nil, errors.New("PLATFORM_PAGING_KEY must be set to at least 32 hex digits (e.g. openssl rand -hex 32)")
	}
	return k, nil
}

// AWSConfig loads the AWS configuration (region, credentials) of the
// environment, with the HTTP client of package sdkhttp.
func AWSConfig(ctx context.Context) (aws.Config, error) {
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return cfg, err
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = sdkhttp.Client()
	} else {
		cfg.HTTPClient = sdkhttp.Shield(cfg.HTTPClient)
	}
	return cfg, nil
}

// DynamoClient returns a DynamoDB client counting its usage (dynamo.CountUsage).
// With handler set, requests go to that in-process DynamoDB (the local
// platform's stand-in) without a network hop.
func DynamoClient(cfg aws.Config, env Env, handler http.Handler) *dynamodb.Client {
	return dynamodb.NewFromConfig(cfg, dynamo.CountUsage, dynamo.MapStorageFull, func(o *dynamodb.Options) {
		// Each call a span of the request's trace (shared/tracing).
		o.APIOptions = append(o.APIOptions, tracing.AWSCalls)
		switch {
		case handler != nil:
			embeddedDynamo(o, handler)
		case env.DynamoEndpoint != "":
			o.BaseEndpoint = aws.String(env.DynamoEndpoint)
		}
	})
}

// InProcess is an http.RoundTripper that serves requests with handler.
func InProcess(handler http.Handler) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		if err := r.Context().Err(); err != nil {
			return nil, err
		}
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, r)
		return rec.Result(), nil
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// AreaHandler builds the HTTP handler of one API area from the environment,
// for a Lambda function.
func AreaHandler(ctx context.Context, area httpapi.Area) (http.Handler, error) {
	return areaHandler(ctx, area, nil)
}

// areaHandler is AreaHandler over the given listener hub (nil: a relay of
// its own, which publishes the Chat API's signals through the table).
func areaHandler(ctx context.Context, area httpapi.Area, hub chatapi.Hub) (http.Handler, error) {
	env := FromEnv()
	key, err := env.PagingKeyBytes()
	if err != nil {
		return nil, err
	}
	cfg, err := AWSConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("aws config: %w", err)
	}
	origins, err := httpapi.ParseOrigins(env.CORSOrigins)
	if err != nil {
		return nil, fmt.Errorf("PLATFORM_CORS_ORIGINS: %w", err)
	}
	limits, err := env.Limits() // the operator's quotas (docs/account.md)
	if err != nil {
		return nil, err
	}
	trusted, err := clientip.Parse(env.TrustedProxies)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", clientip.EnvTrustedProxies, err)
	}
	store, err := NewStore(DynamoClient(cfg, env, nil), env)
	if err != nil {
		return nil, err
	}
	store.SetLimits(limits)
	gw, err := LLM(ctx, area == httpapi.AreaChat) // only the chat function calls the provider
	if err != nil {
		return nil, err
	}
	var semantic *files.Semantic
	if area == httpapi.AreaFiles { // searchFiles, setFilePassages, copyFile
		if semantic, err = Semantic(ctx, true, store); err != nil {
			return nil, err
		}
	}
	logs := Logs(cfg, env)
	// The sweeper (deleteBot's data) deletes file contents where the
	// function is told its bucket (the admin function is, and may delete
	// files/ keys: template.yaml); what it cannot finish within deleteBot's
	// budget the sweeper function does (StartSweeper).
	sweeper := &dynamo.Sweeper{Store: store}
	if os.Getenv("PLATFORM_BUCKET") != "" {
		sweeper.Objects = FileStorage(cfg, env)
	}
	hc := httpapi.Config{Store: store, PagingKey: key, Scheduler: Scheduler(cfg, env), Files: FileStorage(cfg, env),
		TableFiles: &files.TableFiles{Store: store, Objects: FileStorage(cfg, env)},
		Logs:       logs, OnDelivery: logstore.Observer(logs, store, nil), Logger: slog.Default(), Sweeper: sweeper, LLM: gw, Semantic: semantic,
		ClientIP: trusted, ChatStreamURL: env.ChatStreamURL}
	hc.Outbound = Outbound()
	// Deployed code: Lambda functions, invoked through the outbound client.
	if code := CodeRunner(cfg, env, CodeEnvFromEnv(), store, hc.Files); code != nil {
		hc.Code, hc.Outbound = code, WithCode(code, hc.Outbound)
	}
	if hub == nil {
		hub = chatrelay.New(DynamoClient(cfg, env, nil), env.Table, slog.Default())
	}
	hc.Builtins = BuiltinsWith(hub, gw, store, store.Limiter())
	if area == httpapi.AreaAdmin {
		// People's sign-in (docs/signin.md): its client secret from SSM.
		if hc.SignIn, err = SignInConfig(ctx); err != nil {
			return nil, err
		}
		// The hub lists them: published (idempotently) at each cold start
		// of the admin function, after the standard interfaces some of
		// them implement.
		if err := hubstd.Publish(ctx, store); err != nil {
			slog.Default().Error("publishing the standard interfaces", "err", err)
		}
		if err := hc.Builtins.Publish(ctx, store); err != nil {
			slog.Default().Error("publishing the built-in integrations", "err", err)
		}
	}
	api := httpapi.New(hc, area)
	return httpapi.RequestLog(slog.Default(), httpapi.CORS(origins, api)), nil
}

// SignInConfig is people's sign-in as the environment configures it
// (shared/signin.FromEnv); on AWS the OpenID client secret is the SSM
// SecureString PLATFORM_OIDC_CLIENT_SECRET_PARAMETER names, read once at
// cold start when single sign-on is configured.
func SignInConfig(ctx context.Context) (signin.Config, error) {
	// The stack sets these (template.yaml, infra/); the others (throttles,
	// timeouts) are read as they are.
	get := func(k string) string {
		switch k {
		case signin.EnvPublicURL:
			return os.Getenv("PLATFORM_PUBLIC_URL")
		case signin.EnvOIDCIssuer:
			return os.Getenv("PLATFORM_OIDC_ISSUER")
		case signin.EnvOIDCClientID:
			return os.Getenv("PLATFORM_OIDC_CLIENT_ID")
		case signin.EnvOIDCName:
			return os.Getenv("PLATFORM_OIDC_NAME")
		case signin.EnvOIDCAllowedDomains:
			return os.Getenv("PLATFORM_OIDC_ALLOWED_DOMAINS")
		case signin.EnvOIDCWorkspace:
			return os.Getenv("PLATFORM_OIDC_WORKSPACE")
		case signin.EnvOIDCSignUpRole:
			return os.Getenv("PLATFORM_OIDC_SIGNUP_ROLE")
		case signin.EnvOIDCRoleClaim:
			return os.Getenv("PLATFORM_OIDC_ROLE_CLAIM")
		case signin.EnvOIDCRoleMap:
			return os.Getenv("PLATFORM_OIDC_ROLE_MAP")
		}
		return os.Getenv(k)
	}
	cfg, err := signin.FromEnv(get)
	if err != nil {
		return cfg, err
	}
	if name := os.Getenv("PLATFORM_OIDC_CLIENT_SECRET_PARAMETER"); name != "" && cfg.OIDC.Issuer != "" && cfg.OIDC.ClientSecret == "" {
		if cfg.OIDC.ClientSecret, err = ssmSecret(ctx, name); err != nil {
			return cfg, fmt.Errorf("the OpenID client secret (SSM %s): %w", name, err)
		}
	}
	return cfg, nil
}

// Semantic is the semantic search of knowledge bases configured by the
// environment's PLATFORM_EMBEDDINGS_* variables (docs/files.md), over the
// store's vector items; nil (lexical search) without an embeddings model.
// With readKey (AWS), the key may be an SSM SecureString parameter
// (PLATFORM_EMBEDDINGS_API_KEY_PARAMETER), read once here.
func Semantic(ctx context.Context, readKey bool, store *dynamo.Store) (*files.Semantic, error) {
	var secret func(string) (string, error)
	if readKey {
		secret = func(name string) (string, error) { return ssmSecret(ctx, name) }
	}
	// The stack sets these three (template.yaml, infra/); the key, the
	// timeout and the LLM provider's endpoint are read as they are.
	get := func(k string) string {
		switch k {
		case embeddings.EnvModel:
			return os.Getenv("PLATFORM_EMBEDDINGS_MODEL")
		case embeddings.EnvURL:
			return os.Getenv("PLATFORM_EMBEDDINGS_URL")
		case embeddings.EnvAPIKeyParameter:
			return os.Getenv("PLATFORM_EMBEDDINGS_API_KEY_PARAMETER")
		}
		return os.Getenv(k)
	}
	cfg, ok, err := embeddings.FromEnv(get, secret)
	if err != nil || !ok {
		return nil, err
	}
	return &files.Semantic{Embedder: embeddings.New(cfg, nil), Store: store}, nil
}

// LLM is the gateway of the cognitive API configured by the environment's
// PLATFORM_LLM_* variables (docs/llm.md); without a provider it answers
// every call saying which variable to set. With readKey, a key not in the
// environment is read from the SSM SecureString PLATFORM_LLM_API_KEY_PARAMETER
// names (AWS: the stack's /<stack>/llm-api-key, which the chat function
// may read); a missing parameter is no key.
func LLM(ctx context.Context, readKey bool) (*llm.Gateway, error) {
	// The variables the stack sets, read here by name (infra's agreement
	// test checks the stack and this code name the same ones); the others
	// (PLATFORM_LLM_API_KEY, PLATFORM_LLM_CONFIG, the token limits) are
	// read by llm.FromEnv.
	stackVars := map[string]string{
		llm.EnvURL:      os.Getenv("PLATFORM_LLM_URL"),
		llm.EnvProvider: os.Getenv("PLATFORM_LLM_PROVIDER"),
		llm.EnvModels:   os.Getenv("PLATFORM_LLM_MODELS"),
		llm.EnvTimeout:  os.Getenv("PLATFORM_LLM_TIMEOUT"),
	}
	keyParameter := os.Getenv("PLATFORM_LLM_API_KEY_PARAMETER")
	get := func(k string) string {
		if v, ok := stackVars[k]; ok {
			return v
		}
		return os.Getenv(k)
	}
	cfg, err := llm.FromEnv(get)
	if err != nil {
		return nil, err
	}
	if readKey && keyParameter != "" && len(cfg.Providers) > 0 && cfg.Providers[0].APIKey == "" {
		key, err := ssmSecret(ctx, keyParameter)
		if err != nil {
			return nil, fmt.Errorf("the LLM provider's key (%s): %w", keyParameter, err)
		}
		cfg.Providers[0].APIKey = key
	}
	return llm.New(cfg, nil)
}

// ssmSecret reads a SecureString parameter, decrypted ("" when missing).
func ssmSecret(ctx context.Context, name string) (string, error) {
	awsCfg, err := AWSConfig(ctx)
	if err != nil {
		return "", err
	}
	out, err := ssm.NewFromConfig(awsCfg).GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(name), WithDecryption: aws.Bool(true)})
	var missing *ssmtypes.ParameterNotFound
	if errors.As(err, &missing) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return aws.ToString(out.Parameter.Value), nil
}

// EnvAllowPrivate (PLATFORM_DELIVERY_ALLOW_PRIVATE=1) lets the functions'
// calls to bots and integrations reach loopback and private addresses. Not
// for a deployment (a bot's url could then reach into the platform's own
// network): the AWS-shaped local stack (shared/awslocal) sets it, as its
// bots run on the same machine.
const EnvAllowPrivate = "PLATFORM_DELIVERY_ALLOW_PRIVATE"

// Outbound is the client of calls to bots and integrations: public
// addresses only, unless EnvAllowPrivate is set.
func Outbound() *http.Client { return delivery.Client(os.Getenv(EnvAllowPrivate) == "1") }

// UseJSONLogs makes the process log structured JSON lines to stdout (one
// object per line: CloudWatch Logs Insights reads their fields).
func UseJSONLogs() {
	// Each line of a request carries its trace id (shared/tracing).
	slog.SetDefault(slog.New(tracing.LogHandler(slog.NewJSONHandler(os.Stdout, nil))))
}

// StartLambda serves one API area as a Lambda function behind API Gateway
// (HTTP API, payload format 2.0). It never returns.
func StartLambda(area httpapi.Area) {
	UseJSONLogs()
	h, err := AreaHandler(context.Background(), area)
	if err != nil {
		log.Fatal(err)
	}
	startLambdaHandler(httpadapter.NewV2(h).ProxyWithContext)
}

// Scheduler is the EventBridge Scheduler adapter of the environment, or nil
// when no scheduler target is configured.
func Scheduler(cfg aws.Config, env Env) platform.Scheduler {
	if env.SchedulerTargetARN == "" {
		return nil
	}
	client := awsscheduler.NewFromConfig(cfg, func(o *awsscheduler.Options) {
		if env.SchedulerEndpoint != "" {
			o.BaseEndpoint = aws.String(env.SchedulerEndpoint)
		}
	})
	return &scheduler.EventBridge{Client: client, Group: env.ScheduleGroup, TargetARN: env.SchedulerTargetARN, RoleARN: env.SchedulerRoleARN}
}

// startLambda is what each function's Start* does first: JSON logs, the
// environment, the AWS configuration. A function that cannot configure AWS
// cannot serve anything, so it exits.
func startLambda() (Env, aws.Config) {
	UseJSONLogs()
	env := FromEnv()
	cfg, err := AWSConfig(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	return env, cfg
}

// StartScheduler serves the scheduler function: EventBridge Scheduler
// invokes it with a schedule's input, and it fires that recurring event
// (delivery.Recurring). It never returns.
func StartScheduler() {
	env, cfg := startLambda()
	store := lambdaStore(cfg, env)
	r := &delivery.Recurring{Bots: store, Scheduler: Scheduler(cfg, env), Client: Outbound()}
	if code := CodeRunner(cfg, env, CodeEnvFromEnv(), nil, nil); code != nil {
		r.Code, r.Client = code, WithCode(code, r.Client)
	}
	r.Observer = logstore.Observer(Logs(cfg, env), store, nil) // deliveries logged, failures made bot issues
	if ev, ok := any(store).(delivery.EventRecorder); ok {
		r.Events = ev
	}
	startLambdaHandler(func(ctx context.Context, in json.RawMessage) error { return r.Handle(ctx, in) })
}

// S3Client returns the S3 client of the environment: AWS's S3, or the
// endpoint S3_ENDPOINT names (path-style addressing, as MinIO and the
// embedded S3 need).
func S3Client(cfg aws.Config, env Env) *s3.Client {
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		if env.S3Endpoint != "" {
			o.BaseEndpoint = aws.String(env.S3Endpoint)
			o.UsePathStyle = true
		}
	})
}

// FileStorage is the file storage of the environment: the PLATFORM_BUCKET
// bucket.
func FileStorage(cfg aws.Config, env Env) platform.FileStorage {
	return s3store.New(S3Client(cfg, env), env.Bucket, s3store.Options{})
}

// StartUploadCompletion serves the upload-completion function: S3 invokes
// it with the bucket's ObjectCreated events and it completes each upload
// (files.Completer, the code the local platform runs on every completed
// PUT). It never returns.
func StartUploadCompletion() {
	ctx := context.Background()
	env, cfg := startLambda()
	store := lambdaStore(cfg, env)
	semantic, err := Semantic(ctx, true, store)
	if err != nil {
		log.Fatal(err)
	}
	c := &files.Completer{Records: store, Objects: FileStorage(cfg, env), Semantic: semantic}
	startLambdaHandler(s3store.EventHandler(env.Bucket, c.ObjectCreated))
}

// Logs is the CloudWatch Logs store of bot and integration logs of the
// environment (queried with CloudWatch Logs Insights).
func Logs(cfg aws.Config, env Env) *logstore.CloudWatch {
	client := cloudwatchlogs.NewFromConfig(cfg, func(o *cloudwatchlogs.Options) {
		if env.LogsEndpoint != "" {
			o.BaseEndpoint = aws.String(env.LogsEndpoint)
		}
	})
	return &logstore.CloudWatch{Client: client, BotGroup: env.BotLogGroup, IntegrationGroup: env.IntegrationLogGroup}
}
