package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2integrations"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsscheduler"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// Description is the stack's description, word for word the one of
// template.yaml (the agreement test compares them).
const Description = "Self-hosted bot platform API (Botpress-compatible): four API functions " +
	"behind one API Gateway HTTP API, scheduler (EventBridge Scheduler), " +
	"upload-completion (S3) and dispatcher (the table's stream, a " +
	"one-minute schedule) functions, a deletion sweeper, a teardown of " +
	"deployed code, the Chat API's streams (a streaming function URL, a " +
	"fan-out fed by the stream), one DynamoDB table and one S3 bucket. The " +
	"CDK app in infra/ describes the same stack; infra's agreement test " +
	"keeps the two in step."

// Function is one Lambda function of the stack. Its logical ids are
// <ID>Function, <ID>FunctionRole and <ID>LogGroup, as in template.yaml.
type Function struct {
	ID          string // e.g. "Admin"
	Dir         string // functions/<Dir>; also the function name suffix
	Description string
	Timeout     float64  // seconds
	MemorySize  float64  // MB
	Routes      []string // HTTP API paths (method ANY) served by the function; "$default": every path no route takes
}

// Functions are the stack's functions: the four API areas and the three
// background functions.
var Functions = []Function{
	// API functions: within API Gateway's 30 s integration timeout.
	{ID: "Admin", Dir: "admin", Description: "Admin API (functions/admin)", Timeout: 29, MemorySize: 256, Routes: []string{"/v1/admin/{proxy+}", "/", "/console/{proxy+}", "/auth/{proxy+}"}},
	{ID: "Chat", Dir: "chat", Description: "Chat API and webhook ingress (functions/chat)", Timeout: 29, MemorySize: 256, Routes: []string{"/v1/chat/{proxy+}", "/webhooks/{proxy+}", "/v2/cognitive/{proxy+}"}},
	{ID: "Tables", Dir: "tables", Description: "Tables API (functions/tables)", Timeout: 29, MemorySize: 256, Routes: []string{"/v1/tables/{proxy+}", "/v1/tables"}},
	{ID: "Files", Dir: "files", Description: "Files API (functions/files)", Timeout: 29, MemorySize: 256, Routes: []string{"/v1/files/{proxy+}", "/v1/files", "$default"}},
	// Delivers a recurring event to its bot, which may take 2 minutes.
	{ID: "Scheduler", Dir: "scheduler", Description: "Recurring events (functions/scheduler)", Timeout: 150, MemorySize: 256},
	// Reads the object (SHA-256) and indexes up to 16 MiB of it.
	{ID: "UploadCompletion", Dir: "upload-completion", Description: "Upload completion (functions/upload-completion)", Timeout: 300, MemorySize: 512},
	// Starts a pass over the outbox only with 2 min 30 s left (a delivery
	// may take 2 minutes: runtime.DispatchReserve).
	{ID: "Dispatcher", Dir: "dispatcher", Description: "Runtime dispatcher (functions/dispatcher)", Timeout: 300, MemorySize: 256},
	// Stops 10 s before its Timeout (runtime.SweepReserve): runs five
	// minutes apart never overlap.
	{ID: "Sweeper", Dir: "sweeper", Description: "Deletion sweeper (functions/sweeper)", Timeout: 300, MemorySize: 256},
	// CodeTeardown's handler: answers CloudFormation 15 s before its
	// Timeout at the latest (teardown.Reserve).
	{ID: "Teardown", Dir: "teardown", Description: "Deployed code's teardown at stack deletion (functions/teardown)", Timeout: 300, MemorySize: 256},
	// The Chat API's listen streams through a function URL with response
	// streaming: a stream lasts up to Lambda's most (it ends 5 s before).
	{ID: "ChatStream", Dir: "chatstream", Description: "Chat API listen streams (functions/chatstream)", Timeout: 900, MemorySize: 256},
	// Hands the Chat API's signals to the streams' invocations.
	{ID: "ChatFanout", Dir: "chatfanout", Description: "Chat API signal fan-out (functions/chatfanout)", Timeout: 60, MemorySize: 256},
}

// StackOptions configure NewPlatformStack.
type StackOptions struct {
	StackName string
	// LambdaDir holds <Dir>/bootstrap for every function (make lambda
	// builds them into ../.build/lambda).
	LambdaDir string
}

// NewPlatformStack defines the production stack: the same resources,
// logical ids and policies as template.yaml.
func NewPlatformStack(scope constructs.Construct, opts StackOptions) (awscdk.Stack, error) {
	for _, f := range Functions {
		if _, err := os.Stat(filepath.Join(opts.LambdaDir, f.Dir, "bootstrap")); err != nil {
			return nil, fmt.Errorf("function %s: %w (build the binaries first: make -C .. lambda; cdk.json's build step does it)", f.Dir, err)
		}
	}
	stack := awscdk.NewStack(scope, jsii.String(opts.StackName), &awscdk.StackProps{
		StackName:          jsii.String(opts.StackName),
		Description:        jsii.String(Description),
		AnalyticsReporting: jsii.Bool(false),
	})
	s := &builder{stack: stack, fns: map[string]awslambda.Function{}, roles: map[string]awsiam.Role{}, logs: map[string]awslogs.CfnLogGroup{}}
	s.parameters()
	s.storage()
	s.tableCapacity()
	s.logGroups()
	s.failureDestinations()
	s.functions(opts.LambdaDir)
	s.api()
	s.uploadNotification()
	s.dispatcherTriggers()
	s.sweeperSchedule()
	s.codeTeardown()
	s.chatStreams()
	chatStreamURL := s.streamTier()
	// The hosted webchat page is served where the streams are (API Gateway
	// cannot hold its stream): getBotWebchat's codes name it, the webhook
	// URL's page redirects there.
	for _, id := range []string{"Admin", "Chat"} {
		s.fns[id].AddEnvironment(jsii.String("PLATFORM_CHAT_STREAM_URL"), chatStreamURL, nil)
	}
	s.alarms()
	// The API's public base: webhook URLs (dispatcher), invitation and setup
	// links and the OpenID callback (admin, docs/signin.md).
	for _, id := range []string{"Admin", "Dispatcher"} {
		s.fns[id].AddEnvironment(jsii.String("PLATFORM_PUBLIC_URL"), s.publicURL, nil)
	}
	// The console's health page links to the stack's dashboard (docs/metrics.md).
	s.fns["Admin"].AddEnvironment(jsii.String("PLATFORM_DASHBOARD_URL"), awscdk.Fn_Sub(jsii.String("https://${AWS::Region}.console.aws.amazon.com/cloudwatch/home?region=${AWS::Region}#dashboards:name=${AWS::StackName}"), nil), nil)
	s.outputs(chatStreamURL)
	return stack, nil
}

type builder struct {
	stack           awscdk.Stack
	pagingKey       awscdk.CfnParameter
	retention       awscdk.CfnParameter
	corsOrigins     awscdk.CfnParameter
	trustedProxies  awscdk.CfnParameter
	codeConcurrency awscdk.CfnParameter
	// streamConcurrency is ChatStreamFunction's reserved concurrency.
	streamConcurrency awscdk.CfnParameter
	quotas            map[string]awscdk.CfnParameter // by environment variable
	embeddings        map[string]awscdk.CfnParameter // by environment variable
	signin            map[string]awscdk.CfnParameter // by environment variable (docs/signin.md)
	llm               map[string]awscdk.CfnParameter // by environment variable
	trace             map[string]awscdk.CfnParameter // by environment variable (operations.go)
	// sweepIndex is OutboxSweepIndex (awsp38): the outbox's sweep index,
	// sparse or full, on every function and the stream task.
	sweepIndex      awscdk.CfnParameter
	table           awsdynamodb.Table
	bucket          awss3.Bucket
	bucketName      *string // the bucket's name as an expression free of references to it
	scheduleGroup   awsscheduler.CfnScheduleGroup
	schedulerRole   awsiam.Role
	botLogs         awslogs.CfnLogGroup
	integrationLogs awslogs.CfnLogGroup
	codeBoundary    awsiam.CfnManagedPolicy
	api_            awsapigatewayv2.HttpApi
	chatStreamURL   awslambda.FunctionUrl
	fns             map[string]awslambda.Function
	roles           map[string]awsiam.Role
	logs            map[string]awslogs.CfnLogGroup
	// failureQueues are the table-stream mappings' on-failure
	// destinations, by function id (operations.go).
	failureQueues map[string]awssqs.CfnQueue
	// onLambda is the StreamOnLambda condition (streamtier.go).
	onLambda, onContainer, onAlb awscdk.CfnCondition
	// publicURL is the API's public base: https://<DomainName> with a
	// custom domain, else the API's endpoint (operations.go).
	publicURL *string
}

// quotaParameters are the operator's quotas per bot (docs/account.md),
// set on every function.
var quotaParameters = []struct{ name, env, description string }{
	{"QuotaMessagesPerMonth", "BP_QUOTA_MESSAGES_PER_MONTH", "Messages one bot may create in a UTC month (0: no quota)."},
	{"QuotaEventsPerMonth", "BP_QUOTA_EVENTS_PER_MONTH", "Events one bot may create with createEvent in a UTC month (0: no quota)."},
	{"QuotaInvocationsPerMonth", "BP_QUOTA_INVOCATIONS_PER_MONTH", "Calls of one bot by the runtime in a UTC month (0: no quota)."},
	{"QuotaStorageBytes", "BP_QUOTA_STORAGE_BYTES", "Bytes of files one bot may store (0: no quota)."},
	{"QuotaLlmTokensPerMonth", "BP_QUOTA_LLM_TOKENS_PER_MONTH", "LLM tokens (input and output) one bot may use in a UTC month (0: no quota); checked before each call (docs/llm.md)."},
}

// embeddingsKeyParameter is the SSM SecureString holding the embeddings
// endpoint's key (docs/files.md); missing: no key.
const embeddingsKeyParameter = "/${AWS::StackName}/embeddings-api-key"

// oidcSecretParameter is the SSM SecureString holding single sign-on's
// client secret (docs/signin.md).
const oidcSecretParameter = "/${AWS::StackName}/oidc-client-secret"

// signinParameters are people's sign-in (docs/signin.md), set on the admin
// function; the client secret is an SSM SecureString, never a parameter.
var signinParameters = []struct{ name, env, description string }{
	{"OidcIssuer", "PLATFORM_OIDC_ISSUER", "OpenID Connect issuer URL of the single sign-on provider; empty: no single sign-on (PLATFORM_OIDC_ISSUER). Its client secret: the SSM SecureString /<stack name>/oidc-client-secret."},
	{"OidcClientId", "PLATFORM_OIDC_CLIENT_ID", "Client id registered at that provider (PLATFORM_OIDC_CLIENT_ID)."},
	{"OidcName", "PLATFORM_OIDC_NAME", `The provider's display name on the sign-in page, "Sign in with <name>" (PLATFORM_OIDC_NAME).`},
	{"OidcAllowedDomains", "PLATFORM_OIDC_ALLOWED_DOMAINS", "Self sign-up: comma-separated email domains whose verified addresses get an account at their first single sign-on; empty: off (PLATFORM_OIDC_ALLOWED_DOMAINS)."},
	{"OidcWorkspace", "PLATFORM_OIDC_WORKSPACE", "The workspace (id or handle) that self-signed-up accounts join; empty: none (PLATFORM_OIDC_WORKSPACE)."},
	{"OidcSignUpRole", "PLATFORM_OIDC_SIGNUP_ROLE", "Their role there: viewer (empty), billing, developer, manager or administrator (PLATFORM_OIDC_SIGNUP_ROLE)."},
	{"OidcRoleClaim", "PLATFORM_OIDC_ROLE_CLAIM", "A claim (e.g. groups) whose values set the role in OidcWorkspace at every single sign-on; empty: off (PLATFORM_OIDC_ROLE_CLAIM)."},
	{"OidcRoleMap", "PLATFORM_OIDC_ROLE_MAP", "Its values' roles, e.g. bot-admins=administrator,bot-devs=developer; a sign-on mapping to none is refused (PLATFORM_OIDC_ROLE_MAP)."},
}

// llmKeyParameter is the SSM SecureString holding the LLM provider's key.
const llmKeyParameter = "/${AWS::StackName}/llm-api-key"

// llmParameters are the bots' LLM provider (docs/llm.md), set on every
// function; its key is an SSM SecureString (/<stack>/llm-api-key), never
// a parameter.
var llmParameters = []struct{ name, env, def, description string }{
	{"LlmUrl", "PLATFORM_LLM_URL", "", "OpenAI-compatible base URL ending in /v1 of the bots' LLM provider; empty: none (PLATFORM_LLM_URL, docs/llm.md). Its key: the SSM SecureString /<stack name>/llm-api-key."},
	{"LlmProvider", "PLATFORM_LLM_PROVIDER", "openai", "Name prefixing the provider's models (<provider>:<model>) (PLATFORM_LLM_PROVIDER)."},
	{"LlmModels", "PLATFORM_LLM_MODELS", "", `JSON object of client model id -> upstream model id, e.g. {"best":"gpt-4o"}; empty: every alias to the first listed model (PLATFORM_LLM_MODELS).`},
	{"LlmTimeout", "PLATFORM_LLM_TIMEOUT", "25s", "Timeout of each upstream attempt (PLATFORM_LLM_TIMEOUT); under API Gateway's 30 s."},
}

func (s *builder) parameters() {
	s.quotas = map[string]awscdk.CfnParameter{}
	s.pagingKey = awscdk.NewCfnParameter(s.stack, jsii.String("PagingKey"), &awscdk.CfnParameterProps{
		Type:                  jsii.String("String"),
		NoEcho:                jsii.Bool(true),
		MinLength:             jsii.Number(32),
		AllowedPattern:        jsii.String("^([0-9a-fA-F]{2})+$"),
		ConstraintDescription: jsii.String("an even number (at least 32) of hex digits (openssl rand -hex 32)"),
		Description: jsii.String("Hex secret (openssl rand -hex 32) signing the API's pagination tokens; " +
			"shared by the API functions. NoEcho: CloudFormation masks it and " +
			"sam deploy --guided does not save it; later deploys reuse it."),
	})
	s.corsOrigins = awscdk.NewCfnParameter(s.stack, jsii.String("CorsOrigins"), &awscdk.CfnParameterProps{
		Type:    jsii.String("String"),
		Default: jsii.String(""),
		Description: jsii.String("Browser origins allowed to call the API, comma-separated (https://app.example.com, " +
			"http://localhost:*; * for any); empty: none. The API functions answer their " +
			"CORS preflights (PLATFORM_CORS_ORIGINS)."),
	})
	s.trustedProxies = awscdk.NewCfnParameter(s.stack, jsii.String("TrustedProxies"), &awscdk.CfnParameterProps{
		Type:    jsii.String("String"),
		Default: jsii.String(""),
		Description: jsii.String("Proxies in front of API Gateway and the stream URL (CIDRs, comma-separated: a " +
			"CloudFront's or load balancer's ranges) whose X-Forwarded-For is believed; empty: " +
			"the client's address is the event's sourceIp (PLATFORM_TRUSTED_PROXIES)."),
	})
	for _, q := range quotaParameters {
		s.quotas[q.env] = awscdk.NewCfnParameter(s.stack, jsii.String(q.name), &awscdk.CfnParameterProps{
			Type:                  jsii.String("String"),
			Default:               jsii.String("0"),
			AllowedPattern:        jsii.String("^[0-9]+$"),
			ConstraintDescription: jsii.String("a non-negative integer (0 for no quota)"),
			Description:           jsii.String(q.description + " Refused with 403 QuotaExceeded (docs/account.md, " + q.env + ")."),
		})
	}
	s.traceParameters()
	// The outbox's sweep index (docs/runtime.md "The sparse sweep index").
	s.sweepIndex = awscdk.NewCfnParameter(s.stack, jsii.String("OutboxSweepIndex"), &awscdk.CfnParameterProps{
		Type: jsii.String("String"), Default: jsii.String("sparse"), AllowedValues: jsii.Strings("sparse", "full"),
		Description: jsii.String("The outbox's sweep index: sparse (an entry due at once is in no index, the table's stream " +
			"names it to the dispatcher; 3 index write units fewer per delivery) or full (every entry indexed, as before) " +
			"(PLATFORM_OUTBOX_SWEEP_INDEX; docs/runtime.md)."),
	})
	s.llm = map[string]awscdk.CfnParameter{}
	for _, l := range llmParameters {
		s.llm[l.env] = awscdk.NewCfnParameter(s.stack, jsii.String(l.name), &awscdk.CfnParameterProps{
			Type: jsii.String("String"), Default: jsii.String(l.def), Description: jsii.String(l.description),
		})
	}
	var allowed []*string
	for _, d := range []string{"1", "3", "5", "7", "14", "30", "60", "90", "120", "150", "180", "365", "400", "545", "731", "1096", "1827", "2192", "2557", "2922", "3288", "3653"} {
		allowed = append(allowed, jsii.String(d))
	}
	s.codeConcurrency = awscdk.NewCfnParameter(s.stack, jsii.String("CodeMaxReservedConcurrency"), &awscdk.CfnParameterProps{
		Type:                  jsii.String("String"),
		Default:               jsii.String("10"),
		AllowedPattern:        jsii.String("^[0-9]+$"),
		ConstraintDescription: jsii.String("a non-negative integer (0 never reserves)"),
		Description: jsii.String("Cap on the reserved concurrency an integration's maxConcurrency gives its " +
			"function: min(maxConcurrency, cap); 0: none is ever reserved " +
			"(PLATFORM_CODE_MAX_RESERVED_CONCURRENCY, docs/runtime.md)."),
	})
	// The open streams' bound (template.yaml's reasoning): the API keeps
	// the rest of the account's concurrency.
	s.streamConcurrency = awscdk.NewCfnParameter(s.stack, jsii.String("ChatStreamConcurrency"), &awscdk.CfnParameterProps{
		Type:                  jsii.String("Number"),
		Default:               jsii.Number(200),
		MinValue:              jsii.Number(0),
		MaxValue:              jsii.Number(900),
		ConstraintDescription: jsii.String("an integer from 0 to 900 (the account's 1,000 less the 100 Lambda keeps unreserved)"),
		Description: jsii.String("Reserved concurrency of ChatStreamFunction: at most this many Chat API " +
			"streams open at once, the rest of the account's concurrency kept for " +
			"the API functions; more are refused with 429. 0 refuses every stream " +
			"(docs/deploy.md)."),
	})
	s.embeddings = map[string]awscdk.CfnParameter{
		"PLATFORM_EMBEDDINGS_MODEL": awscdk.NewCfnParameter(s.stack, jsii.String("EmbeddingsModel"), &awscdk.CfnParameterProps{
			Type: jsii.String("String"), Default: jsii.String(""),
			Description: jsii.String("Embeddings model of knowledge bases' semantic search (e.g. text-embedding-3-small); " +
				"empty: search stays lexical (PLATFORM_EMBEDDINGS_MODEL, docs/files.md)."),
		}),
		"PLATFORM_EMBEDDINGS_URL": awscdk.NewCfnParameter(s.stack, jsii.String("EmbeddingsUrl"), &awscdk.CfnParameterProps{
			Type: jsii.String("String"), Default: jsii.String(""),
			Description: jsii.String("OpenAI-compatible base URL ending in /v1 of the embeddings model " +
				"(PLATFORM_EMBEDDINGS_URL); empty: the LLM provider's (LlmUrl). Its key: the SSM SecureString " +
				"/<stack name>/embeddings-api-key (none: no key)."),
		}),
	}
	s.signin = map[string]awscdk.CfnParameter{}
	for _, p := range signinParameters {
		s.signin[p.env] = awscdk.NewCfnParameter(s.stack, jsii.String(p.name), &awscdk.CfnParameterProps{
			Type: jsii.String("String"), Default: jsii.String(""), Description: jsii.String(p.description),
		})
	}
	s.retention = awscdk.NewCfnParameter(s.stack, jsii.String("LogRetentionDays"), &awscdk.CfnParameterProps{
		Type:          jsii.String("Number"),
		Default:       jsii.String("30"),
		AllowedValues: &allowed,
		Description:   jsii.String("Days CloudWatch Logs keeps the functions' logs and the bot and integration logs."),
	})
}

func (s *builder) storage() {
	// Exactly what shared/dynamo.EnsureTable creates locally.
	str := awsdynamodb.AttributeType_STRING
	s.table = awsdynamodb.NewTable(s.stack, jsii.String("Table"), &awsdynamodb.TableProps{
		PartitionKey:        &awsdynamodb.Attribute{Name: jsii.String("pk"), Type: str},
		SortKey:             &awsdynamodb.Attribute{Name: jsii.String("sk"), Type: str},
		BillingMode:         awsdynamodb.BillingMode_PAY_PER_REQUEST,
		TimeToLiveAttribute: jsii.String("ttl"),
		// Keys of changed items, for the dispatcher's event source (outbox inserts).
		Stream: awsdynamodb.StreamViewType_KEYS_ONLY,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		DeletionProtection: jsii.Bool(true),
		RemovalPolicy:      awscdk.RemovalPolicy_RETAIN,
	})
	for _, g := range []string{"gsi1", "gsi2"} {
		s.table.AddGlobalSecondaryIndex(&awsdynamodb.GlobalSecondaryIndexProps{
			IndexName:      jsii.String(g),
			PartitionKey:   &awsdynamodb.Attribute{Name: jsii.String(g + "pk"), Type: str},
			SortKey:        &awsdynamodb.Attribute{Name: jsii.String(g + "sk"), Type: str},
			ProjectionType: awsdynamodb.ProjectionType_ALL,
		})
	}
	logicalID(s.table, "Table")

	// The name is derived from the stack id (unique, lower case) so that
	// the upload-completion function can name the bucket without a
	// reference to it: the bucket's notification depends on that function.
	s.bucketName = awscdk.Fn_Join(jsii.String(""), &[]*string{
		jsii.String("platform-files-"),
		awscdk.Fn_Select(jsii.Number(2), awscdk.Fn_Split(jsii.String("/"), awscdk.Aws_STACK_ID(), nil)),
	})
	s.bucket = awss3.NewBucket(s.stack, jsii.String("FilesBucket"), &awss3.BucketProps{
		BucketName:        s.bucketName,
		Encryption:        awss3.BucketEncryption_S3_MANAGED,
		BlockPublicAccess: awss3.BlockPublicAccess_BLOCK_ALL(),
		ObjectOwnership:   awss3.ObjectOwnership_BUCKET_OWNER_ENFORCED,
		EnforceSSL:        jsii.Bool(true),
		Cors: &[]*awss3.CorsRule{{
			AllowedMethods: &[]awss3.HttpMethods{awss3.HttpMethods_GET, awss3.HttpMethods_HEAD, awss3.HttpMethods_PUT},
			AllowedOrigins: jsii.Strings("*"),
			AllowedHeaders: jsii.Strings("*"),
			ExposedHeaders: jsii.Strings("ETag"),
			MaxAge:         jsii.Number(3600),
		}},
		// Backups (docs/backup.md): versions kept as long as the table's
		// point-in-time recovery, for local aws-restore.
		Versioned: jsii.Bool(true),
		LifecycleRules: &[]*awss3.LifecycleRule{{
			Id:                                  jsii.String("abort-incomplete-multipart-uploads"),
			AbortIncompleteMultipartUploadAfter: awscdk.Duration_Days(jsii.Number(1)),
		}, {
			Id:                          jsii.String("noncurrent-versions"),
			NoncurrentVersionExpiration: awscdk.Duration_Days(jsii.Number(35)),
		}},
		RemovalPolicy: awscdk.RemovalPolicy_RETAIN,
	})
	logicalID(s.bucket, "FilesBucket")
	logicalID(s.bucket.Policy(), "FilesBucketPolicy")

	// One schedule per bot recurring event, created by the admin function.
	s.scheduleGroup = awsscheduler.NewCfnScheduleGroup(s.stack, jsii.String("ScheduleGroup"), nil)
}

func (s *builder) logGroups() {
	group := func(id, name string) awslogs.CfnLogGroup {
		return awslogs.NewCfnLogGroup(s.stack, jsii.String(id), &awslogs.CfnLogGroupProps{
			LogGroupName:    awscdk.Fn_Sub(jsii.String(name), nil),
			RetentionInDays: s.retention.ValueAsNumber(),
		})
	}
	for _, f := range Functions {
		s.logs[f.ID] = group(f.ID+"LogGroup", "/aws/lambda/${AWS::StackName}-"+f.Dir)
	}
	s.botLogs = group("BotLogGroup", "/platform/${AWS::StackName}/bots")
	s.integrationLogs = group("IntegrationLogGroup", "/platform/${AWS::StackName}/integrations")
	// The permissions boundary of the roles of deployed code's functions
	// (shared/lambdarunner): writing log streams of the bot and integration
	// log groups is the most any of them can do.
	s.codeBoundary = awsiam.NewCfnManagedPolicy(s.stack, jsii.String("CodeBoundary"), &awsiam.CfnManagedPolicyProps{
		Description: jsii.String("Boundary of the roles of deployed code's functions (own log streams only)"),
		PolicyDocument: policy(allow([]string{"logs:CreateLogStream", "logs:PutLogEvents"},
			s.botLogs.AttrArn(), s.integrationLogs.AttrArn())),
	})
	s.codeBoundary.OverrideLogicalId(jsii.String("CodeBoundary"))
}

// Deployed code's functions and their roles: named and placed by the
// stack's name (template.yaml's PLATFORM_CODE_* and deployed-code policy).
const (
	codePrefix      = "${AWS::StackName}-code-"
	codeFunctionARN = "arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:function:${AWS::StackName}-code-*"
	codeRoleARN     = "arn:${AWS::Partition}:iam::${AWS::AccountId}:role/${AWS::StackName}-code/*"
)

// invokeCode is the policy of the functions that call deployed code.
func invokeCode() awsiam.PolicyDocument {
	return policy(allow([]string{"lambda:InvokeFunction"}, awscdk.Fn_Sub(jsii.String(codeFunctionARN), nil)))
}

// allow is an Allow statement.
func allow(actions []string, resources ...*string) awsiam.PolicyStatement {
	return awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Actions:   jsii.Strings(actions...),
		Resources: &resources,
	})
}

func policy(statements ...awsiam.PolicyStatement) awsiam.PolicyDocument {
	return awsiam.NewPolicyDocument(&awsiam.PolicyDocumentProps{Statements: &statements})
}

// tableActions are item-level reads and writes (transactions are authorized
// per item by these): no Scan, no table management.
var tableActions = []string{
	"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query", "dynamodb:PutItem",
	"dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem", "dynamodb:ConditionCheckItem",
}

// dispatcherTableActions are tableActions but BatchWriteItem.
var dispatcherTableActions = []string{
	"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query", "dynamodb:PutItem",
	"dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:ConditionCheckItem",
}

// policies are each function's inline policies beyond its own log group:
// least privilege, as in template.yaml.
func (s *builder) policies(id string) map[string]awsiam.PolicyDocument {
	table := policy(allow(tableActions, s.table.TableArn(), jsii.String(*s.table.TableArn()+"/index/*")))
	schedules := awscdk.Fn_Sub(jsii.String("arn:${AWS::Partition}:scheduler:${AWS::Region}:${AWS::AccountId}:schedule/${Group}/*"),
		&map[string]*string{"Group": s.scheduleGroup.Ref()})
	platformLogs := []*string{s.botLogs.AttrArn(), s.integrationLogs.AttrArn()}
	writePlatformLogs := policy(allow([]string{"logs:CreateLogStream", "logs:PutLogEvents"}, platformLogs...))
	// The embeddings API key's SSM parameter, read at cold start (the
	// AWS-managed aws/ssm key decrypts for SSM's callers).
	embeddingsKey := policy(allow([]string{"ssm:GetParameter"},
		awscdk.Fn_Sub(jsii.String("arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter"+embeddingsKeyParameter), nil)))
	switch id {
	case "Admin":
		passRole := allow([]string{"iam:PassRole"}, s.schedulerRole.RoleArn())
		passRole.AddCondition(jsii.String("StringEquals"), map[string]any{"iam:PassedToService": "scheduler.amazonaws.com"})
		roles := awscdk.Fn_Sub(jsii.String(codeRoleARN), nil)
		createRole := allow([]string{"iam:CreateRole", "iam:PutRolePolicy"}, roles)
		createRole.AddCondition(jsii.String("StringEquals"), map[string]any{"iam:PermissionsBoundary": s.codeBoundary.Ref()})
		passCodeRole := allow([]string{"iam:PassRole"}, roles)
		passCodeRole.AddCondition(jsii.String("StringEquals"), map[string]any{"iam:PassedToService": "lambda.amazonaws.com"})
		return map[string]awsiam.PolicyDocument{
			"table": table,
			// Single sign-on's client secret, read at cold start (docs/signin.md).
			"oidc-client-secret": policy(allow([]string{"ssm:GetParameter"},
				awscdk.Fn_Sub(jsii.String("arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter"+oidcSecretParameter), nil))),
			// Deployed code: functions <stack>-code-*, roles under
			// /<stack>-code/ made only with the boundary, passed to Lambda only.
			"deployed-code": policy(
				allow([]string{"lambda:CreateFunction", "lambda:UpdateFunctionCode", "lambda:UpdateFunctionConfiguration",
					"lambda:GetFunction", "lambda:DeleteFunction", "lambda:InvokeFunction",
					// An integration's maxConcurrency: the function's reserved concurrency.
					"lambda:PutFunctionConcurrency", "lambda:DeleteFunctionConcurrency"}, awscdk.Fn_Sub(jsii.String(codeFunctionARN), nil)),
				createRole,
				allow([]string{"iam:GetRole", "iam:DeleteRolePolicy", "iam:DeleteRole"}, roles),
				passCodeRole,
			),
			"schedules": policy(
				allow([]string{"scheduler:CreateSchedule", "scheduler:UpdateSchedule", "scheduler:DeleteSchedule", "scheduler:GetSchedule"}, schedules),
				passRole,
			),
			"platform-logs": policy(
				allow([]string{"logs:CreateLogStream", "logs:PutLogEvents", "logs:StartQuery"}, platformLogs...),
				allow([]string{"logs:GetQueryResults", "logs:StopQuery"}, jsii.String("*")),
			),
			// Deployed code, icons and readmes: code/ keys; of the files of
			// bots, only their deletion (deleteBot, shared/dynamo.Sweeper).
			"bucket": policy(
				allow([]string{"s3:GetObject", "s3:PutObject", "s3:DeleteObject"}, s.bucket.ArnForObjects(jsii.String("code/*"))),
				allow([]string{"s3:DeleteObject"}, s.bucket.ArnForObjects(jsii.String("files/*"))),
				allow([]string{"s3:ListBucket"}, s.bucket.BucketArn()),
			),
		}
	case "Chat", "ChatStream":
		docs := map[string]awsiam.PolicyDocument{"table": table, "platform-logs": writePlatformLogs, "invoke-deployed-code": invokeCode(),
			// The Webchat API's files, answered by both (the hosted page
			// is served by the stream host; a client may call the webhook
			// URL): visitors' uploads are signed with this role
			// (PutObject, and PutObjectTagging for the component's
			// x-amz-tagging header), their links read the content
			// (GetObject; ListBucket: a missing object answers 404 rather
			// than 403).
			"bucket": policy(
				allow([]string{"s3:GetObject", "s3:PutObject", "s3:PutObjectTagging"}, s.bucket.ArnForObjects(jsii.String("files/*"))),
				allow([]string{"s3:ListBucket"}, s.bucket.BucketArn()),
			)}
		if id == "Chat" { // the streaming function has no LLM key (docs/llm.md)
			// The LLM provider's key, read at cold start.
			docs["llm-api-key"] = policy(allow([]string{"ssm:GetParameter"}, awscdk.Fn_Sub(jsii.String("arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter"+llmKeyParameter), nil)))
		}
		return docs
	case "ChatFanout":
		return map[string]awsiam.PolicyDocument{
			// Reads a signal and a topic's listeners, writes inboxes,
			// deletes expired listeners: no index, no update, no batch.
			"table":         policy(allow([]string{"dynamodb:GetItem", "dynamodb:Query", "dynamodb:PutItem", "dynamodb:DeleteItem"}, s.table.TableArn())),
			"stream":        streamRead(s.table.TableStreamArn()),
			"failure-queue": s.sendToFailureQueue("ChatFanout"),
		}
	case "Scheduler":
		return map[string]awsiam.PolicyDocument{
			"table": table, "platform-logs": writePlatformLogs, "invoke-deployed-code": invokeCode(),
			// An orphan schedule (bot or recurring event gone) deletes itself.
			"schedules": policy(allow([]string{"scheduler:DeleteSchedule"}, schedules)),
		}
	case "Tables":
		return map[string]awsiam.PolicyDocument{
			"table": table,
			"bucket": policy(
				// A table export is stored as a file of the bot (PutObject,
				// replacing the previous one: DeleteObject) and completed at
				// once (GetObject); an import reads an uploaded file.
				allow([]string{"s3:GetObject", "s3:PutObject", "s3:DeleteObject"}, s.bucket.ArnForObjects(jsii.String("files/*"))),
				allow([]string{"s3:ListBucket"}, s.bucket.BucketArn()),
			),
		}
	case "Files":
		return map[string]awsiam.PolicyDocument{
			"table": table, "embeddings-key": embeddingsKey,
			"bucket": policy(
				// PutObject: the presigned upload URLs are signed with this role.
				allow([]string{"s3:GetObject", "s3:PutObject", "s3:DeleteObject"}, s.bucket.ArnForObjects(jsii.String("files/*"))),
				// ListBucket: a missing object answers 404 rather than 403.
				allow([]string{"s3:ListBucket"}, s.bucket.BucketArn()),
			),
		}
	case "Dispatcher":
		return map[string]awsiam.PolicyDocument{
			// Outbox leases, event statuses, bot issues: no batch writes.
			"table":                policy(allow(dispatcherTableActions, s.table.TableArn(), jsii.String(*s.table.TableArn()+"/index/*"))),
			"stream":               streamRead(s.table.TableStreamArn()),
			"platform-logs":        writePlatformLogs,
			"invoke-deployed-code": invokeCode(),
			"failure-queue":        s.sendToFailureQueue("Dispatcher"),
		}
	case "Sweeper":
		return map[string]awsiam.PolicyDocument{
			"table": table,
			// Deleted bots' file contents: delete only.
			"bucket": policy(allow([]string{"s3:DeleteObject"}, s.bucket.ArnForObjects(jsii.String("files/*")))),
		}
	case "Teardown":
		// Deployed code's functions and roles, to delete them: nothing
		// else. Listing has no resource-level permissions.
		return map[string]awsiam.PolicyDocument{
			"deployed-code": policy(
				allow([]string{"lambda:ListFunctions", "iam:ListRoles"}, jsii.String("*")),
				allow([]string{"lambda:DeleteFunction"}, awscdk.Fn_Sub(jsii.String(codeFunctionARN), nil)),
				allow([]string{"iam:ListRolePolicies", "iam:DeleteRolePolicy", "iam:DeleteRole"}, awscdk.Fn_Sub(jsii.String(codeRoleARN), nil)),
			),
		}
	case "UploadCompletion":
		bucketArn := awscdk.Fn_Join(jsii.String(""), &[]*string{jsii.String("arn:"), awscdk.Aws_PARTITION(), jsii.String(":s3:::"), s.bucketName})
		return map[string]awsiam.PolicyDocument{
			"table": table, "embeddings-key": embeddingsKey,
			"bucket": policy(
				// GetObject (and HeadObject): what landed, its SHA-256, its
				// text to index; DeleteObject: a superseded or rejected upload.
				allow([]string{"s3:GetObject", "s3:DeleteObject"}, jsii.String(*bucketArn+"/files/*")),
				// ListBucket: an object deleted meanwhile answers 404 rather than 403.
				allow([]string{"s3:ListBucket"}, bucketArn),
			),
		}
	}
	panic("no policies for function " + id)
}

// streamRead is what Lambda's event source mapping reads with a role.
func streamRead(stream *string) awsiam.PolicyDocument {
	return policy(
		allow([]string{"dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator"}, stream),
		// ListStreams has no resource-level permissions (it lists stream
		// ARNs, no data).
		allow([]string{"dynamodb:ListStreams"}, jsii.String("*")),
	)
}

// withEmbeddings adds the embeddings parameters (knowledge bases' semantic
// search: the files function searches, upload completion indexes).
func (s *builder) withEmbeddings(env map[string]*string) map[string]*string {
	for k, p := range s.embeddings {
		env[k] = p.ValueAsString()
	}
	env["PLATFORM_EMBEDDINGS_API_KEY_PARAMETER"] = awscdk.Fn_Sub(jsii.String(embeddingsKeyParameter), nil)
	return env
}

// environment is each function's environment beyond PLATFORM_TABLE.
func (s *builder) environment(id string) map[string]*string {
	logs := map[string]*string{
		"PLATFORM_BOT_LOG_GROUP":         s.botLogs.Ref(),
		"PLATFORM_INTEGRATION_LOG_GROUP": s.integrationLogs.Ref(),
	}
	cors := s.corsOrigins.ValueAsString()
	switch id {
	case "Admin":
		logs["PLATFORM_PAGING_KEY"] = s.pagingKey.ValueAsString()
		logs["PLATFORM_CORS_ORIGINS"] = cors
		logs["PLATFORM_SCHEDULE_GROUP"] = s.scheduleGroup.Ref()
		logs["PLATFORM_SCHEDULER_TARGET_ARN"] = s.fns["Scheduler"].FunctionArn()
		logs["PLATFORM_SCHEDULER_ROLE_ARN"] = s.schedulerRole.RoleArn()
		logs["PLATFORM_BUCKET"] = s.bucket.BucketName()
		logs["PLATFORM_CODE_PREFIX"] = awscdk.Fn_Sub(jsii.String(codePrefix), nil)
		logs["PLATFORM_CODE_ROLE_PATH"] = awscdk.Fn_Sub(jsii.String("/${AWS::StackName}-code/"), nil)
		logs["PLATFORM_CODE_BOUNDARY_ARN"] = s.codeBoundary.Ref()
		logs["PLATFORM_CODE_LOGS_ARN"] = awscdk.Fn_Sub(jsii.String("arn:${AWS::Partition}:logs:${AWS::Region}:${AWS::AccountId}:log-group:"), nil)
		logs["PLATFORM_CODE_MAX_RESERVED_CONCURRENCY"] = s.codeConcurrency.ValueAsString()
		for env, p := range s.signin { // people's sign-in (docs/signin.md)
			logs[env] = p.ValueAsString()
		}
		logs["PLATFORM_OIDC_CLIENT_SECRET_PARAMETER"] = awscdk.Fn_Sub(jsii.String(oidcSecretParameter), nil)
		return logs
	case "Chat", "ChatStream":
		logs["PLATFORM_PAGING_KEY"] = s.pagingKey.ValueAsString()
		logs["PLATFORM_CORS_ORIGINS"] = cors
		logs["PLATFORM_TRUSTED_PROXIES"] = s.trustedProxies.ValueAsString()
		logs["PLATFORM_CODE_PREFIX"] = awscdk.Fn_Sub(jsii.String(codePrefix), nil)
		logs["PLATFORM_BUCKET"] = s.bucket.BucketName() // the Webchat API's files
		if id == "Chat" {                               // the streaming function has no LLM key (docs/llm.md)
			logs["PLATFORM_LLM_API_KEY_PARAMETER"] = awscdk.Fn_Sub(jsii.String(llmKeyParameter), nil)
		}
		return logs
	case "Scheduler":
		logs["PLATFORM_SCHEDULE_GROUP"] = s.scheduleGroup.Ref()
		// Its own ARN, built from its name: a function cannot reference itself.
		logs["PLATFORM_SCHEDULER_TARGET_ARN"] = awscdk.Fn_Sub(jsii.String("arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:function:${AWS::StackName}-scheduler"), nil)
		logs["PLATFORM_CODE_PREFIX"] = awscdk.Fn_Sub(jsii.String(codePrefix), nil)
		return logs
	case "Tables":
		// Table exports and imports are files of the bot (exportTable, importTable).
		return map[string]*string{"PLATFORM_PAGING_KEY": s.pagingKey.ValueAsString(), "PLATFORM_CORS_ORIGINS": cors, "PLATFORM_BUCKET": s.bucket.BucketName()}
	case "Files":
		return s.withEmbeddings(map[string]*string{"PLATFORM_PAGING_KEY": s.pagingKey.ValueAsString(), "PLATFORM_CORS_ORIGINS": cors, "PLATFORM_BUCKET": s.bucket.BucketName()})
	case "UploadCompletion":
		return s.withEmbeddings(map[string]*string{"PLATFORM_BUCKET": s.bucketName})
	case "Dispatcher":
		logs["PLATFORM_CODE_PREFIX"] = awscdk.Fn_Sub(jsii.String(codePrefix), nil)
		return logs
	case "Sweeper":
		// Deleted bots' file contents (files/ keys).
		return map[string]*string{"PLATFORM_BUCKET": s.bucket.BucketName()}
	case "Teardown":
		return map[string]*string{
			"PLATFORM_CODE_PREFIX":    awscdk.Fn_Sub(jsii.String(codePrefix), nil),
			"PLATFORM_CODE_ROLE_PATH": awscdk.Fn_Sub(jsii.String("/${AWS::StackName}-code/"), nil),
		}
	case "ChatFanout":
		return map[string]*string{}
	}
	panic("no environment for function " + id)
}

func (s *builder) functions(lambdaDir string) {
	// The scheduler function comes first: the admin function's environment
	// and SchedulerRole's policy name it.
	order := []Function{}
	for _, f := range Functions {
		if f.ID == "Scheduler" {
			order = append([]Function{f}, order...)
		} else {
			order = append(order, f)
		}
	}
	for _, f := range order {
		if f.ID == "Admin" {
			s.schedulerRoleFor(s.fns["Scheduler"])
		}
		docs := map[string]awsiam.PolicyDocument{
			"function-logs": policy(allow([]string{"logs:CreateLogStream", "logs:PutLogEvents"}, s.logs[f.ID].AttrArn())),
			// X-Ray active tracing: no resource-level permissions.
			"tracing": policy(allow([]string{"xray:PutTraceSegments", "xray:PutTelemetryRecords"}, jsii.String("*"))),
		}
		for k, v := range s.policies(f.ID) {
			docs[k] = v
		}
		role := awsiam.NewRole(s.stack, jsii.String(f.ID+"FunctionRole"), &awsiam.RoleProps{
			AssumedBy:      awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
			InlinePolicies: &docs,
		})
		logicalID(role, f.ID+"FunctionRole")
		s.roles[f.ID] = role

		// PLATFORM_BUILTINS: the same built-in integrations in every function.
		env := map[string]*string{"PLATFORM_TABLE": s.table.TableName(), "PLATFORM_BUILTINS": jsii.String("all")}
		for k, p := range s.quotas { // every function: the operator's quotas per bot
			env[k] = p.ValueAsString()
		}
		for k, p := range s.llm { // every function: the bots' LLM provider
			env[k] = p.ValueAsString()
		}
		for k, p := range s.trace { // every function: where its spans go
			env[k] = p.ValueAsString()
		}
		env["PLATFORM_OUTBOX_SWEEP_INDEX"] = s.sweepIndex.ValueAsString() // every function: the outbox's sweep index
		for k, v := range s.environment(f.ID) {
			env[k] = v
		}
		fn := awslambda.NewFunction(s.stack, jsii.String(f.ID+"Function"), &awslambda.FunctionProps{
			FunctionName: awscdk.Fn_Sub(jsii.String("${AWS::StackName}-"+f.Dir), nil),
			Description:  jsii.String(f.Description),
			Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
			Architecture: awslambda.Architecture_ARM_64(),
			Handler:      jsii.String("bootstrap"),
			Code:         awslambda.Code_FromAsset(jsii.String(filepath.Join(lambdaDir, f.Dir)), nil),
			MemorySize:   jsii.Number(f.MemorySize),
			Timeout:      awscdk.Duration_Seconds(jsii.Number(f.Timeout)),
			Role:         role,
			Environment:  &env,
		})
		logicalID(fn, f.ID+"Function")
		// Active tracing, set on the L1 (the L2's Tracing would add a
		// policy of its own beside the role's inline ones).
		fn.Node().DefaultChild().(awslambda.CfnFunction).SetTracingConfig(&awslambda.CfnFunction_TracingConfigProperty{Mode: jsii.String("Active")})
		if f.ID == "ChatStream" {
			fn.Node().DefaultChild().(awslambda.CfnFunction).SetReservedConcurrentExecutions(s.streamConcurrency.ValueAsNumber())
		}
		// The log group exists before the function can log: the role may
		// write to it but not create it.
		fn.Node().AddDependency(s.logs[f.ID])
		s.fns[f.ID] = fn
	}
}

// schedulerRoleFor creates the role EventBridge Scheduler assumes to invoke
// the scheduler function.
func (s *builder) schedulerRoleFor(target awslambda.Function) {
	s.schedulerRole = awsiam.NewRole(s.stack, jsii.String("SchedulerRole"), &awsiam.RoleProps{
		AssumedBy: awsiam.NewServicePrincipal(jsii.String("scheduler.amazonaws.com"), &awsiam.ServicePrincipalOpts{
			Conditions: &map[string]any{"StringEquals": map[string]any{"aws:SourceAccount": awscdk.Aws_ACCOUNT_ID()}},
		}),
		InlinePolicies: &map[string]awsiam.PolicyDocument{
			"invoke-scheduler-function": policy(allow([]string{"lambda:InvokeFunction"}, target.FunctionArn())),
		},
	})
	logicalID(s.schedulerRole, "SchedulerRole")
}

func (s *builder) api() {
	s.api_ = awsapigatewayv2.NewHttpApi(s.stack, jsii.String("HttpApi"), &awsapigatewayv2.HttpApiProps{
		ApiName: s.stack.StackName(),
	})
	logicalID(s.api_, "HttpApi")
	// Throttling at the edge: the default stage's default route settings
	// (template.yaml's DefaultRouteSettings; SAM names the stage so).
	rate := awscdk.NewCfnParameter(s.stack, jsii.String("ApiThrottlingRateLimit"), &awscdk.CfnParameterProps{
		Type: jsii.String("Number"), Default: jsii.Number(1000), MinValue: jsii.Number(1),
		Description: jsii.String("Requests per second the HTTP API takes on every route together, steady state (its default route throttling); beyond, 429."),
	})
	burst := awscdk.NewCfnParameter(s.stack, jsii.String("ApiThrottlingBurstLimit"), &awscdk.CfnParameterProps{
		Type: jsii.String("Number"), Default: jsii.Number(2000), MinValue: jsii.Number(1),
		Description: jsii.String("Requests the HTTP API takes at once above its rate (the token bucket's size); beyond, 429."),
	})
	stage := s.api_.DefaultStage().Node().DefaultChild().(awsapigatewayv2.CfnStage)
	stage.OverrideLogicalId(jsii.String("HttpApiApiGatewayDefaultStage"))
	stage.SetDefaultRouteSettings(&awsapigatewayv2.CfnStage_RouteSettingsProperty{
		ThrottlingBurstLimit: burst.ValueAsNumber(), ThrottlingRateLimit: rate.ValueAsNumber(),
	})
	for _, f := range Functions {
		if len(f.Routes) == 0 {
			continue
		}
		integration := awsapigatewayv2integrations.NewHttpLambdaIntegration(jsii.String(f.ID+"Integration"), s.fns[f.ID],
			&awsapigatewayv2integrations.HttpLambdaIntegrationProps{PayloadFormatVersion: awsapigatewayv2.PayloadFormatVersion_VERSION_2_0()})
		for _, path := range f.Routes {
			if path == "$default" {
				// Every path no other route takes (template.yaml's CatchAll).
				awsapigatewayv2.NewHttpRoute(s.stack, jsii.String("CatchAllRoute"), &awsapigatewayv2.HttpRouteProps{
					HttpApi: s.api_, RouteKey: awsapigatewayv2.HttpRouteKey_DEFAULT(), Integration: integration,
				})
				continue
			}
			s.api_.AddRoutes(&awsapigatewayv2.AddRoutesOptions{
				Path:        jsii.String(path),
				Methods:     &[]awsapigatewayv2.HttpMethod{awsapigatewayv2.HttpMethod_ANY},
				Integration: integration,
			})
		}
	}
}

// uploadNotification sends ObjectCreated events of the bucket to the
// upload-completion function, as SAM's S3 event does: a notification on the
// bucket itself (no custom resource) and a permission the bucket depends on.
func (s *builder) uploadNotification() {
	fn := s.fns["UploadCompletion"]
	perm := awslambda.NewCfnPermission(s.stack, jsii.String("UploadCompletionFunctionUploadedPermission"), &awslambda.CfnPermissionProps{
		Action:        jsii.String("lambda:InvokeFunction"),
		FunctionName:  fn.FunctionName(),
		Principal:     jsii.String("s3.amazonaws.com"),
		SourceAccount: awscdk.Aws_ACCOUNT_ID(),
	})
	cfn := s.bucket.Node().DefaultChild().(awss3.CfnBucket)
	cfn.SetNotificationConfiguration(&awss3.CfnBucket_NotificationConfigurationProperty{
		LambdaConfigurations: &[]any{&awss3.CfnBucket_LambdaConfigurationProperty{
			Event:    jsii.String("s3:ObjectCreated:*"),
			Function: fn.FunctionArn(),
			// Contents are generation-keyed: files/<botId>/<fileId>/<generation>.
			Filter: &awss3.CfnBucket_NotificationFilterProperty{S3Key: &awss3.CfnBucket_S3KeyFilterProperty{
				Rules: &[]any{&awss3.CfnBucket_FilterRuleProperty{Name: jsii.String("prefix"), Value: jsii.String("files/")}},
			}},
		}},
	})
	cfn.AddDependency(perm)
}

// dispatcherTriggers invoke the dispatcher function as template.yaml's
// events do: the table's stream, filtered on outbox inserts (a plain event
// source mapping: CDK's DynamoEventSource would add a policy of its own
// with ListStreams, beside the role's inline ones), and a one-minute
// schedule for retries and scheduled events.
func (s *builder) dispatcherTriggers() {
	fn := s.fns["Dispatcher"]
	pattern := `{"eventName":["INSERT"],"dynamodb":{"Keys":{"pk":{"S":[{"prefix":"OUTBOX#"}]}}}}`
	awslambda.NewCfnEventSourceMapping(s.stack, jsii.String("DispatcherFunctionOutbox"), &awslambda.CfnEventSourceMappingProps{
		FunctionName:   fn.FunctionName(),
		EventSourceArn: s.table.TableStreamArn(),
		// A mapping replaced or recreated reads what the stream holds,
		// and a failing batch is retried until its records leave the
		// stream (template.yaml says why: the sparse sweep index).
		StartingPosition:               jsii.String("TRIM_HORIZON"),
		BatchSize:                      jsii.Number(100),
		MaximumBatchingWindowInSeconds: jsii.Number(0),
		MaximumRetryAttempts:           jsii.Number(-1),
		MaximumRecordAgeInSeconds:      jsii.Number(-1),
		BisectBatchOnFunctionError:     jsii.Bool(true),
		DestinationConfig:              s.onFailure("Dispatcher"),
		// Batches of one stream shard in parallel, each outbox shard's
		// records in order (template.yaml says the same).
		ParallelizationFactor: jsii.Number(10),
		FilterCriteria: &awslambda.CfnEventSourceMapping_FilterCriteriaProperty{
			Filters: &[]any{&awslambda.CfnEventSourceMapping_FilterProperty{Pattern: jsii.String(pattern)}},
		},
	})
	rule := awsevents.NewRule(s.stack, jsii.String("DispatcherFunctionRetries"), &awsevents.RuleProps{
		Schedule: awsevents.Schedule_Rate(awscdk.Duration_Minutes(jsii.Number(1))),
		Targets:  &[]awsevents.IRuleTarget{awseventstargets.NewLambdaFunction(fn, nil)},
	})
	logicalID(rule, "DispatcherFunctionRetries")
	// The target's invoke permission (made in the rule's scope), named as
	// SAM names it.
	for _, c := range *rule.Node().Children() {
		if p, ok := c.(awslambda.CfnPermission); ok && p.Principal() != nil && *p.Principal() == "events.amazonaws.com" {
			p.OverrideLogicalId(jsii.String("DispatcherFunctionRetriesPermission"))
		}
	}
}

// sweeperSchedule invokes the sweeper function every five minutes, as
// template.yaml's Schedule event does (the rule and its permission named as
// SAM names them).
func (s *builder) sweeperSchedule() {
	rule := awsevents.NewRule(s.stack, jsii.String("SweeperFunctionSweep"), &awsevents.RuleProps{
		Schedule: awsevents.Schedule_Rate(awscdk.Duration_Minutes(jsii.Number(5))),
		Targets:  &[]awsevents.IRuleTarget{awseventstargets.NewLambdaFunction(s.fns["Sweeper"], nil)},
	})
	logicalID(rule, "SweeperFunctionSweep")
	for _, c := range *rule.Node().Children() {
		if p, ok := c.(awslambda.CfnPermission); ok && p.Principal() != nil && *p.Principal() == "events.amazonaws.com" {
			p.OverrideLogicalId(jsii.String("SweeperFunctionSweepPermission"))
		}
	}
}

// codeTeardown is the custom resource whose Delete (the stack's deletion)
// deletes deployed code's functions and roles, as template.yaml's
// CodeTeardown: deleted after the admin function, which depends on it,
// and before CodeBoundary, on which it depends.
func (s *builder) codeTeardown() {
	cr := awscdk.NewCfnResource(s.stack, jsii.String("CodeTeardown"), &awscdk.CfnResourceProps{
		Type: jsii.String("Custom::CodeTeardown"),
		Properties: &map[string]any{
			"ServiceToken": s.fns["Teardown"].FunctionArn(),
			// Without an answer, CloudFormation gives up after 6 minutes.
			"ServiceTimeout": 360,
		},
	})
	cr.OverrideLogicalId(jsii.String("CodeTeardown"))
	cr.AddDependency(s.codeBoundary)
	s.fns["Admin"].Node().AddDependency(cr)
}

// chatStreams are the Chat API's streams on AWS (docs/chat-api.md): the
// streaming function's URL (no auth: the Chat API checks its user keys),
// and the fan-out fed by the table's stream with the signals
// (shared/chatrelay.StreamFilter).
func (s *builder) chatStreams() {
	s.chatStreamURL = s.fns["ChatStream"].AddFunctionUrl(&awslambda.FunctionUrlOptions{
		AuthType: awslambda.FunctionUrlAuthType_NONE, InvokeMode: awslambda.InvokeMode_RESPONSE_STREAM})
	logicalID(s.chatStreamURL, "ChatStreamFunctionUrl")
	for _, c := range *s.fns["ChatStream"].Node().Children() {
		// Named as SAM names its own, and as template.yaml names the
		// lambda:InvokeFunction one (InvokedViaFunctionUrl) SAM does not add.
		if p, ok := c.(awslambda.CfnPermission); ok && p.FunctionUrlAuthType() != nil {
			p.OverrideLogicalId(jsii.String("ChatStreamFunctionUrlPublicPermissions"))
		} else if ok && *p.Action() == "lambda:InvokeFunction" {
			p.OverrideLogicalId(jsii.String("ChatStreamFunctionUrlInvokePermission"))
		}
	}
	awslambda.NewCfnEventSourceMapping(s.stack, jsii.String("ChatFanoutFunctionSignals"), &awslambda.CfnEventSourceMappingProps{
		FunctionName:                   s.fns["ChatFanout"].FunctionName(),
		EventSourceArn:                 s.table.TableStreamArn(),
		StartingPosition:               jsii.String("LATEST"),
		BatchSize:                      jsii.Number(100),
		MaximumBatchingWindowInSeconds: jsii.Number(0),
		// Then the batch is dropped: a signal is best effort (its range
		// kept in the failure queue).
		MaximumRetryAttempts:       jsii.Number(2),
		MaximumRecordAgeInSeconds:  jsii.Number(3600),
		BisectBatchOnFunctionError: jsii.Bool(true),
		DestinationConfig:          s.onFailure("ChatFanout"),
		FilterCriteria: &awslambda.CfnEventSourceMapping_FilterCriteriaProperty{
			Filters: &[]any{&awslambda.CfnEventSourceMapping_FilterProperty{
				Pattern: jsii.String(`{"eventName":["INSERT"],"dynamodb":{"Keys":{"pk":{"S":[{"prefix":"CHATSIG#"}]}}}}`)}},
		},
	})
}

func (s *builder) outputs(chatStreamURL *string) {
	out := func(id, description string, value *string) {
		awscdk.NewCfnOutput(s.stack, jsii.String(id), &awscdk.CfnOutputProps{Description: jsii.String(description), Value: value})
	}
	out("ApiUrl", "Base URL of the API (apiUrl of @botpress/client): https://<DomainName> with a custom domain", s.publicURL)
	out("ChatStreamUrl", "Base URL of the Chat API's streams (apiUrl of @botpress/chat: <ChatStreamUrl>webhooks/<webhookId>)", chatStreamURL)
	out("TableName", "DynamoDB table (PLATFORM_TABLE of scripts/issue-token and scripts/first-account.sh)", s.table.TableName())
	out("BucketName", "S3 bucket of file contents", s.bucket.BucketName())
	out("ScheduleGroupName", "EventBridge Scheduler group of the bots' recurring events", s.scheduleGroup.Ref())
	out("BotLogGroupName", "CloudWatch Logs group of bot logs", s.botLogs.Ref())
	out("IntegrationLogGroupName", "CloudWatch Logs group of integration logs", s.integrationLogs.Ref())
	out("DispatcherFailureQueueUrl", "SQS queue of the dispatcher's given-up stream batches (go run ./functions/replay)", s.failureQueues["Dispatcher"].Ref())
	out("ChatFanoutFailureQueueUrl", "SQS queue of the chat fan-out's given-up stream batches (go run ./functions/replay)", s.failureQueues["ChatFanout"].Ref())
}

// logicalID gives the CloudFormation resource of an L2 construct the logical
// id template.yaml uses for it.
func logicalID(c constructs.IConstruct, id string) {
	c.Node().DefaultChild().(awscdk.CfnResource).OverrideLogicalId(jsii.String(id))
}
