// Package awslocal runs the AWS build of the platform whole on one
// machine: the Lambda binaries of template.yaml (built as `make lambda`
// builds them) as processes under the Lambda Runtime API, within the
// account's concurrency and the functions' reservations (concurrency.go),
// behind an API Gateway HTTP API made from the template's routes (payload
// 2.0, 10 MB, 30 s), with the template's environment; the function URLs of the
// template (functionurl.go: BUFFERED, or RESPONSE_STREAM passed on as the
// function posts it), each on a port of its own; the table (the embedded
// durable DynamoDB, or an external endpoint) whose stream drives the
// dispatcher and the chat fan-out through each one's filter and batch
// settings; the bucket (the
// embedded S3, or an external endpoint) whose object-created events drive
// upload completion; EventBridge Scheduler; CloudWatch Logs with Insights
// queries; and Lambda and IAM for deployed bots' code. Every AWS call a
// function makes goes through an endpoint of its own, is recorded and is
// checked against the function's role in the template: a call the role
// does not allow is refused as AccessDenied, as AWS would (docs/deploy.md).
package awslocal

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/fsutil"
	"github.com/botforge/platform/shared/httpapi"
	"github.com/botforge/platform/shared/iampolicy"
	"github.com/botforge/platform/shared/lambdarunner/lambdatest"
	"github.com/botforge/platform/shared/localdynamo"
	"github.com/botforge/platform/shared/locals3"
	"github.com/botforge/platform/shared/runtime"
	"github.com/botforge/platform/shared/s3store"
	"github.com/botforge/platform/shared/signin"
)

// Options configure the stack.
type Options struct {
	Addr    string // where the HTTP API listens (default 127.0.0.1:8080)
	DataDir string // the stack's state: table, bucket, schedules, logs
	// Root is the repository (template.yaml, Makefile, functions/);
	// default: the first directory up from the working directory holding
	// template.yaml and go.mod.
	Root string
	// Template is the template to run (default Root/template.yaml): a
	// copy with a role changed runs the same code under that role.
	Template string
	// DynamoEndpoint and S3Endpoint: external services (moto) instead of
	// the embedded ones.
	DynamoEndpoint, S3Endpoint string
	// SQSEndpoint: the SQS service (moto_server) holding the template's
	// queues (the stream mappings' on-failure destinations); empty: the
	// embedded stand-in (sqs.go).
	SQSEndpoint string
	Logger      *slog.Logger
	// FunctionOutput receives the functions' output lines (default: the
	// logger at debug level).
	FunctionOutput io.Writer
	// Ready, when set, is called once the API listens, with its address.
	Ready func(addr string)
	// Prebuilt, when set, is a directory where Build already built the
	// functions (tests running several stacks build once).
	Prebuilt string
	// CheckRoles are more templates whose roles each function's calls
	// must satisfy too, by logical id: the template the CDK app in infra/
	// synthesizes (cdk.out/bot-platform.template.json), so a call its
	// role would refuse is refused here as on a stack deployed with it.
	CheckRoles []string
	// AccountConcurrency is the account's Lambda concurrency the stack's
	// functions share (concurrency.go; default DefaultAccountConcurrency,
	// AWS's 1,000 scaled down by ten). Reservations of the template are
	// scaled by AccountConcurrency/1,000 unless their parameter is given
	// in Parameters.
	AccountConcurrency int
	// Parameters are stack parameter values, as sam deploy's
	// --parameter-overrides (the template's defaults otherwise).
	Parameters map[string]string
	// StreamTier is the stack's StreamTier parameter (default lambda);
	// container runs StreamTasks processes of the stream service behind a
	// load balancer's stand-in (streamtier.go).
	StreamTier  string
	StreamTasks int
	// StreamLoadBalancer is the stack's StreamLoadBalancerType (alb, the
	// default; nlb: TCP passed through with proxy protocol v2 to tasks
	// that end TLS with a test certificate, nlb.go).
	StreamLoadBalancer string
	// SecureStrings are SSM SecureString parameters by name, put before
	// any function starts (ssm.go), as an operator puts
	// /<stack>/oidc-client-secret before deploying.
	SecureStrings map[string]string
}

// AdminEmail is the email of the stack's first account, as `make run`'s.
const AdminEmail = "admin@localhost"

// Stack is a running stack.
type Stack struct {
	Template *Template
	Calls    *Recorder
	URL      string
	// SetupURL is the first account's one-time setup link when this start
	// created the account (docs/signin.md).
	SetupURL string
	// FirstToken is the first account's token when this start made it.
	FirstToken string
	// FunctionURLs are the served function URLs (ending with '/') by the
	// function's logical id: ChatStreamFunction's is the ChatStreamUrl
	// output, in <data-dir>/aws-local/outputs.json with the others.
	FunctionURLs map[string]string
	// OperatorURL is the operator's endpoint of every AWS service of the
	// stack (no role; operator.env's AWS_ENDPOINT_URL).
	OperatorURL string

	log     *slog.Logger
	out     io.Writer
	outMu   sync.Mutex
	funcs   map[string]*lambdaFunction // by logical id
	account *account
	logs    *cwLogs
	code    *lambdatest.Server
	// The container tier behind the NLB's stand-in (nlb.go): the test
	// certificate's directory, the secret it is served from, and the
	// certificate (PEM, with its key) clients must trust.
	streamTLSDir      string
	secrets           *secretsManager
	StreamCertificate []byte
	closers           []func() error
	coldMu            sync.Mutex
	cold              []ColdStart
	roles             map[string][]iampolicyStatement // role ARN -> its statements
	// streamMaps are the table stream's event source mappings, one per
	// function with a DynamoDB event (the dispatcher, the chat fan-out):
	// each sees every change and filters it with its own patterns.
	streamMu   sync.Mutex
	streamMaps []*streamMapping
	schedules  *schedules
	// stream is the table's stream as DynamoDB Streams serves it
	// (streamapi.go); sqs the SQS stand-in the failure queues are in,
	// queueBase its URL for the queues' URLs (failure.go).
	stream               *streamLog
	sqs                  http.Handler
	queueBase            string
	accessKey, secretKey string
	// fault, when set, fails a function's AWS calls (InjectFault).
	faultMu sync.Mutex
	fault   func(function, operation string) bool
	// xray is the X-Ray daemon's stand-in (xraydaemon.go).
	xray *xrayDaemon
	// throttle is the HTTP API's default route throttling (throttle.go).
	throttle *tokenBucket
}

// InjectFault makes the AWS calls of the stack's functions for which
// fails(function's logical id, operation, e.g. "GetItem") is true fail
// with a non-retryable error, as an outage of the service would; nil
// lifts it. Fault-injection tests use it.
func (s *Stack) InjectFault(fails func(function, operation string) bool) {
	s.faultMu.Lock()
	s.fault = fails
	s.faultMu.Unlock()
}

func (s *Stack) faulty(function, operation string) bool {
	s.faultMu.Lock()
	f := s.fault
	s.faultMu.Unlock()
	return f != nil && f(function, operation)
}

// secrets are made at the first start and kept in the data directory.
type secrets struct {
	PagingKey string `json:"pagingKey"`
	AccessKey string `json:"accessKey"`
	SecretKey string `json:"secretKey"`
}

func loadSecrets(dir string) (secrets, error) {
	path := filepath.Join(dir, "aws-local.json")
	var s secrets
	b, err := os.ReadFile(path)
	if err == nil {
		return s, json.Unmarshal(b, &s)
	}
	if !errors.Is(err, os.ErrNotExist) {
		return s, err
	}
	s = secrets{PagingKey: randomHex(32), AccessKey: "AKIALOCAL" + strings.ToUpper(randomHex(6)), SecretKey: randomHex(20)}
	b, _ = json.MarshalIndent(s, "", "  ")
	return s, fsutil.WriteFileAtomic(path, b)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// FindRoot finds the repository from the working directory up.
func FindRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if fileExists(filepath.Join(dir, "template.yaml")) && fileExists(filepath.Join(dir, "go.mod")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no template.yaml and go.mod in the working directory or above it (run from the repository, or pass its path)")
		}
		dir = parent
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// Build builds the template's functions as the Lambda build does
// (Makefile's LAMBDA_BUILD: -trimpath, -tags lambda.norpc, -ldflags
// "-s -w", CGO_ENABLED=0), for this machine, in one go build (shared
// compilation) into dir/<package's last element>.
func Build(ctx context.Context, root string, t *Template, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	args := []string{"build", "-trimpath", "-tags", "lambda.norpc", "-ldflags", "-s -w", "-o", dir + string(filepath.Separator)}
	for _, f := range t.Functions {
		args = append(args, f.Package)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build of the functions: %v\n%s", err, out)
	}
	return nil
}

// binary is where Build put a function's executable.
func binary(dir string, f *Function) string { return filepath.Join(dir, filepath.Base(f.Package)) }

// Run serves the stack until ctx is done.
func Run(ctx context.Context, o Options) error {
	if o.Addr == "" {
		o.Addr = "127.0.0.1:8080"
	}
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return err
	}
	s, err := Open(ctx, o, ln)
	if err != nil {
		ln.Close()
		return err
	}
	defer s.Close()
	srv := &http.Server{Handler: s.handler(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	if s.FirstToken != "" {
		fmt.Fprintf(os.Stderr, "\nFirst account %s created. Its personal access token (also in %s):\n\n    %s\n\n",
			AdminEmail, filepath.Join(o.DataDir, "admin-token"), s.FirstToken)
		fmt.Fprintf(os.Stderr, "Set its password (or link single sign-on) once, at this link (also in %s):\n\n    %s\n\n",
			filepath.Join(o.DataDir, "setup-link"), s.SetupURL)
	}
	s.log.Info("aws-local: the stack's HTTP API is listening", "url", s.URL, "dataDir", o.DataDir)
	ids := make([]string, 0, len(s.FunctionURLs))
	for id := range s.FunctionURLs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		s.log.Info("aws-local: function URL", "function", id, "url", s.FunctionURLs[id], "outputs", filepath.Join(o.DataDir, "aws-local", "outputs.json"))
	}
	if o.Ready != nil {
		o.Ready(ln.Addr().String())
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}

func (s *Stack) handler() http.Handler {
	return &apiGateway{routes: s.Template.Routes, throttle: s.throttle, invoke: func(ctx context.Context, fn *Function, payload []byte) invokeResult {
		return s.funcs[fn.LogicalID].invokeSync(ctx, payload)
	}}
}

// Handler is the stack's HTTP API.
func (s *Stack) Handler() http.Handler { return s.handler() }

// Open starts everything but the HTTP API's server, whose listener ln is
// given (its address is the API's URL).
func Open(ctx context.Context, o Options, ln net.Listener) (*Stack, error) {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	root := o.Root
	if root == "" {
		var err error
		if root, err = FindRoot(); err != nil {
			return nil, err
		}
	}
	tplPath := o.Template
	if tplPath == "" {
		tplPath = filepath.Join(root, "template.yaml")
	}
	if err := os.MkdirAll(filepath.Join(o.DataDir, "aws-local"), 0o700); err != nil {
		return nil, err
	}
	sec, err := loadSecrets(o.DataDir)
	if err != nil {
		return nil, err
	}
	s := &Stack{Calls: &Recorder{log: log}, log: log, out: o.FunctionOutput, funcs: map[string]*lambdaFunction{}}
	ok := false
	defer func() {
		if !ok {
			s.Close()
		}
	}()
	s.URL = "http://" + ln.Addr().String()
	params := map[string]string{"PagingKey": sec.PagingKey, "CorsOrigins": httpapi.LocalOrigins}
	for k, v := range o.Parameters {
		params[k] = v
	}
	tpl, err := ReadTemplate(tplPath, filepath.Join(root, "Makefile"), streamTierParams(o, params), s.URL)
	if err != nil {
		return nil, err
	}
	if o.AccountConcurrency <= 0 {
		o.AccountConcurrency = DefaultAccountConcurrency
	}
	for _, f := range tpl.Functions {
		if _, given := o.Parameters[f.ReservedParam]; f.Reserved > 0 && !(f.ReservedParam != "" && given) {
			f.Reserved = scaleReserved(f.Reserved, o.AccountConcurrency)
		}
	}
	if s.account, err = newAccount(o.AccountConcurrency, tpl.Functions); err != nil {
		return nil, err
	}
	if err := tpl.addRoleChecks(o.CheckRoles); err != nil {
		return nil, err
	}
	s.Template = tpl
	// The HTTP API's default route throttling (throttle.go): one bucket
	// for every handler of the API.
	s.throttle = tpl.apiThrottle()
	s.accessKey, s.secretKey = sec.AccessKey, sec.SecretKey
	s.stream = &streamLog{arn: tpl.StreamARN, table: tpl.TableName}
	if len(tpl.Skipped) > 0 {
		log.Warn("aws-local: functions of the template without a Go package of the repository do not run here", "functions", tpl.Skipped)
	}
	if s.roles, err = tpl.roleStatements(); err != nil {
		return nil, err
	}
	binDir := o.Prebuilt
	if binDir == "" {
		binDir = filepath.Join(o.DataDir, "aws-local", "bin")
		start := time.Now()
		if err := Build(ctx, root, tpl, binDir); err != nil {
			return nil, err
		}
		log.Info("aws-local: built the functions", "count", len(tpl.Functions), "took", time.Since(start).Round(time.Millisecond))
	}

	// DynamoDB: the embedded one (its changes feed the table's stream) or
	// an external endpoint (no stream: the dispatcher's schedule alone
	// drives it).
	var ddb http.Handler
	if o.DynamoEndpoint == "" {
		d, err := localdynamo.Open(filepath.Join(o.DataDir, "dynamodb"))
		if err != nil {
			return nil, fmt.Errorf("embedded DynamoDB: %w", err)
		}
		s.closers = append(s.closers, d.Close)
		d.OnChange(s.tableChanges)
		ddb = d
	} else {
		ddb, err = reverseProxy(o.DynamoEndpoint)
		if err != nil {
			return nil, err
		}
	}
	// The table's stream is read through DynamoDB's endpoint (embedded
	// table only: an external one's stream is not seen here).
	if o.DynamoEndpoint == "" {
		ddb = dynamoOrStreams{table: ddb, streams: s.stream}
	}
	ddbClient := dynamodb.NewFromConfig(aws.Config{Region: Region, Credentials: credentials.NewStaticCredentialsProvider(sec.AccessKey, sec.SecretKey, "")}, func(op *dynamodb.Options) {
		op.BaseEndpoint = aws.String("http://dynamodb.local")
		op.HTTPClient = &http.Client{Transport: runtime.InProcess(ddb)}
	})
	if err := dynamo.EnsureTable(ctx, ddbClient, tpl.TableName); err != nil {
		return nil, fmt.Errorf("table: %w", err)
	}

	// S3: the embedded one (its PUTs are the bucket's object-created
	// events) or an external endpoint.
	var s3h http.Handler
	if o.S3Endpoint == "" {
		st, err := locals3.Open(locals3.Options{Dir: filepath.Join(o.DataDir, "s3"), Region: Region,
			AccessKeyID: sec.AccessKey, SecretAccessKey: sec.SecretKey,
			OnPut: func(ctx context.Context, obj locals3.PutObject) error {
				return s.objectCreated(context.WithoutCancel(ctx), obj)
			}})
		if err != nil {
			return nil, fmt.Errorf("embedded S3: %w", err)
		}
		s.closers = append(s.closers, st.Close)
		if err := st.EnsureBucket(ctx, tpl.BucketName); err != nil {
			return nil, err
		}
		s3h = st
	} else {
		if s3h, err = reverseProxy(o.S3Endpoint); err != nil {
			return nil, err
		}
		if err := ensureBucket(ctx, s3h, tpl.BucketName, sec); err != nil {
			return nil, err
		}
	}

	sched, err := openSchedules(filepath.Join(o.DataDir, "aws-local", "schedules.json"), log)
	if err != nil {
		return nil, err
	}
	sched.invoke = s.invokeAs
	s.schedules = sched
	if s.logs, err = openCWLogs(filepath.Join(o.DataDir, "aws-local", "cloudwatch-logs.jsonl")); err != nil {
		return nil, err
	}
	s.closers = append(s.closers, s.logs.Close)
	s.code = lambdatest.NewHandler(&host{dir: filepath.Join(o.DataDir, "aws-local", "code"), log: log})
	s.code.OnLogs(s.codeLogs)

	// The X-Ray daemon of the functions' active tracing.
	if s.xray, err = startXRayDaemon(); err != nil {
		return nil, err
	}
	s.closers = append(s.closers, s.xray.close)

	// The Lambda Runtime API of every instance of every function.
	rtLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	rtSrv := &http.Server{Handler: http.HandlerFunc(s.serveRuntime)}
	go func() { _ = rtSrv.Serve(rtLn) }()
	s.closers = append(s.closers, rtSrv.Close)

	// SQS: the failure queues' service (an external one, or the embedded
	// stand-in).
	if o.SQSEndpoint != "" {
		if s.sqs, err = reverseProxy(o.SQSEndpoint); err != nil {
			return nil, err
		}
	} else {
		q, err := openQueues(filepath.Join(o.DataDir, "aws-local", "sqs.json"))
		if err != nil {
			return nil, err
		}
		s.sqs = q
	}
	// Lambda: deployed code's functions, and Invoke of the stack's own
	// (the operator's replay of a failure queue; a function's role
	// allows none of them).
	lambdaH := stackInvoke{s: s, next: s.code}
	s.secrets = &secretsManager{}
	services := map[string]http.Handler{"dynamodb": ddb, "s3": s3h, "scheduler": sched, "logs": s.logs, "lambda": lambdaH, "iam": s.code, "secretsmanager": s.secrets}
	// SSM: the stack's SecureString parameters (ssm.go).
	ssmParams, err := openSSM(filepath.Join(o.DataDir, "aws-local", "ssm.json"), o.SecureStrings)
	if err != nil {
		return nil, fmt.Errorf("SSM: %w", err)
	}
	services["ssm"] = ssmParams
	// The operator's endpoint serves SQS too; the functions' do not (none
	// calls it: only their mappings send, checked in failure.go).
	opServices := map[string]http.Handler{"sqs": s.sqs}
	for k, v := range services {
		opServices[k] = v
	}
	// The operator's own access (no role, nothing recorded): what
	// scripts/issue-token and scripts/first-account.sh use with an AWS
	// account's credentials, described in <data-dir>/aws-local/operator.env.
	opLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	opSrv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := opServices[serviceOf(r)]; h != nil {
			h.ServeHTTP(w, r)
			return
		}
		http.Error(w, "aws-local: unknown service", http.StatusNotImplemented)
	})}
	go func() { _ = opSrv.Serve(opLn) }()
	s.closers = append(s.closers, opSrv.Close)
	opURL := "http://" + opLn.Addr().String()
	// AWS_ENDPOINT_URL: every AWS SDK client of the operator's commands
	// (functions/replay) at the operator's endpoint.
	opEnv := fmt.Sprintf("PLATFORM_TABLE=%s\nPLATFORM_BUCKET=%s\nDYNAMODB_ENDPOINT=%s\nS3_ENDPOINT=%s\nAWS_ENDPOINT_URL=%s\nAWS_REGION=%s\nAWS_ACCESS_KEY_ID=%s\nAWS_SECRET_ACCESS_KEY=%s\n",
		tpl.TableName, tpl.BucketName, opURL, opURL, opURL, Region, sec.AccessKey, sec.SecretKey)
	s.queueBase = opURL
	tpl.SetQueueBase(opURL)
	if err := s.ensureQueues(ctx); err != nil {
		return nil, fmt.Errorf("SQS: %w", err)
	}
	s.OperatorURL = opURL
	if err := fsutil.WriteFileAtomic(filepath.Join(o.DataDir, "aws-local", "operator.env"), []byte(opEnv)); err != nil {
		return nil, err
	}
	for _, f := range tpl.Functions {
		epLn, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		e := &endpoint{fn: f, services: services, rec: s.Calls, role: s.code.Role, fault: s.faulty, cors: tpl.bucketCORS}
		if o.S3Endpoint != "" {
			e.created = func(bucket, key string, size int64) {
				_ = s.objectCreated(context.Background(), locals3.PutObject{Bucket: bucket, Key: key, Size: size})
			}
		}
		ep := &http.Server{Handler: e}
		go func() { _ = ep.Serve(epLn) }()
		s.closers = append(s.closers, ep.Close)
		awsURL := "http://" + epLn.Addr().String()
		env := []string{
			"PATH=" + os.Getenv("PATH"), "TZ=UTC", "LANG=C.UTF-8",
			"AWS_REGION=" + Region, "AWS_DEFAULT_REGION=" + Region,
			"AWS_ACCESS_KEY_ID=" + sec.AccessKey, "AWS_SECRET_ACCESS_KEY=" + sec.SecretKey,
			"AWS_CONFIG_FILE=" + os.DevNull, "AWS_SHARED_CREDENTIALS_FILE=" + os.DevNull, "AWS_EC2_METADATA_DISABLED=true",
			"AWS_LAMBDA_FUNCTION_NAME=" + f.Name, "AWS_LAMBDA_FUNCTION_VERSION=$LATEST",
			"AWS_LAMBDA_FUNCTION_MEMORY_SIZE=" + strconv.Itoa(f.Memory), "AWS_LAMBDA_LOG_GROUP_NAME=/aws/lambda/" + f.Name,
			"AWS_EXECUTION_ENV=AWS_Lambda_provided.al2023", "_HANDLER=bootstrap", "LAMBDA_TASK_ROOT=" + binDir,
			// The bots and integrations of this stack run on this machine.
			runtime.EnvAllowPrivate + "=1",
			// Every service at the function's own endpoint.
			"DYNAMODB_ENDPOINT=" + awsURL, "S3_ENDPOINT=" + awsURL, "SCHEDULER_ENDPOINT=" + awsURL,
			"LOGS_ENDPOINT=" + awsURL, "LAMBDA_ENDPOINT=" + awsURL, "IAM_ENDPOINT=" + awsURL,
			"AWS_ENDPOINT_URL_SSM=" + awsURL, // the SDK's own variable (ssm.go)
			// Active tracing's daemon, as Lambda names it (xraydaemon.go).
			"AWS_XRAY_DAEMON_ADDRESS=" + s.xray.addr(), "AWS_XRAY_CONTEXT_MISSING=LOG_ERROR",
		}
		keys := make([]string, 0, len(f.Env))
		for k := range f.Env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			// No SSM here: the providers' keys the functions would read
			// from SecureString parameters (*_API_KEY_PARAMETER) are
			// none, as a missing parameter is (docs/llm.md); reading one
			// would fail the chat function's start (the real SSM's host
			// is not reachable), so the parameter is not named.
			if strings.HasSuffix(k, "_API_KEY_PARAMETER") {
				continue
			}
			env = append(env, k+"="+f.Env[k])
		}
		lf := newLambdaFunction(f, binary(binDir, f), env, rtLn.Addr().String())
		lf.output = s.functionOutput
		lf.account = s.account
		lf.started = func(c ColdStart) {
			s.coldMu.Lock()
			s.cold = append(s.cold, c)
			s.coldMu.Unlock()
		}
		s.funcs[f.LogicalID] = lf
	}
	// The function URLs: each on a listener of its own (on AWS each is a
	// host of its own), published as the stack's outputs.
	s.FunctionURLs = map[string]string{}
	for _, f := range tpl.Functions {
		if f.URL == nil {
			continue
		}
		uLn, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		us := &http.Server{Handler: &functionURL{fn: f, invoke: s.funcs[f.LogicalID]}, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = us.Serve(uLn) }()
		s.closers = append(s.closers, us.Close)
		u := "http://" + uLn.Addr().String() + "/"
		s.FunctionURLs[f.LogicalID] = u
		tpl.SetFunctionURL(f, u)
	}
	s.streamTLSDir = filepath.Join(o.DataDir, "aws-local")
	if err := s.startStreamTier(ctx, root, binDir, tpl, services, sec, o.StreamTasks); err != nil {
		return nil, err
	}
	// What names the stream function's URL or the load balancer (the chat
	// and admin functions' PLATFORM_CHAT_STREAM_URL), now served: before
	// any of those functions starts (the API is not served yet).
	for _, f := range tpl.Functions {
		if len(f.lateEnv) == 0 {
			continue
		}
		if err := tpl.resolveLateEnv(f); err != nil {
			return nil, err
		}
		lf := s.funcs[f.LogicalID]
		for k := range f.lateEnv {
			lf.env = append(lf.env, k+"="+f.Env[k])
		}
	}
	outputs, _ := json.MarshalIndent(tpl.Outputs(), "", "  ")
	if err := fsutil.WriteFileAtomic(filepath.Join(o.DataDir, "aws-local", "outputs.json"), outputs); err != nil {
		return nil, err
	}
	s.closers = append(s.closers, func() error {
		var wg sync.WaitGroup
		for _, lf := range s.funcs {
			wg.Add(1)
			go func() { defer wg.Done(); lf.close() }()
		}
		wg.Wait()
		return nil
	})

	// Background: schedules (EventBridge Scheduler's and the template's
	// Schedule events), the stream's event source mapping.
	bg, stop := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	s.closers = append(s.closers, func() error { stop(); wg.Wait(); return nil })
	wg.Add(1)
	go func() { defer wg.Done(); sched.run(bg) }()
	for _, f := range tpl.Functions {
		for _, expr := range f.Schedule {
			wg.Add(1)
			go func() { defer wg.Done(); s.ruleLoop(bg, f, expr) }()
		}
		if f.Stream != nil {
			m := &streamMapping{stack: s}
			s.streamMu.Lock()
			s.streamMaps = append(s.streamMaps, m)
			s.streamMu.Unlock()
			if err := m.start(bg, &wg, f); err != nil {
				return nil, err
			}
		}
	}

	// The first account, as scripts/issue-token makes it in a deployed
	// stack (and `make run` on its first start).
	store := dynamo.New(ddbClient, tpl.TableName)
	if err := bootstrap(ctx, store, o.DataDir, &s.FirstToken); err != nil {
		return nil, err
	}
	if s.FirstToken != "" {
		// Its one-time setup link (docs/signin.md), in <dataDir>/setup-link.
		acct, _, err := store.AccountByEmail(ctx, AdminEmail)
		if err != nil {
			return nil, err
		}
		link, err := signin.New(signin.Config{}, store, nil, nil, nil).NewSetupLink(ctx, s.URL, acct)
		if err != nil {
			return nil, err
		}
		if err := fsutil.WriteFileAtomic(filepath.Join(o.DataDir, "setup-link"), []byte(link)); err != nil {
			return nil, err
		}
		s.SetupURL = link
	}
	s.closers = append(s.closers, func() error { return s.writeReport(o.DataDir) })
	ok = true
	return s, nil
}

// tableChanges hands the table's committed changes to every event source
// mapping of its stream.
func (s *Stack) tableChanges(cs []localdynamo.Change) {
	recs := s.stream.append(cs)
	if len(recs) == 0 {
		return
	}
	s.streamMu.Lock()
	maps := append([]*streamMapping(nil), s.streamMaps...)
	s.streamMu.Unlock()
	for _, m := range maps {
		m.changes(recs)
	}
}

// Close stops the stack.
func (s *Stack) Close() error {
	var errs []error
	for i := len(s.closers) - 1; i >= 0; i-- {
		errs = append(errs, s.closers[i]())
	}
	s.closers = nil
	return errors.Join(errs...)
}

// Invoke invokes a function of the stack by its logical id, as Lambda's
// Invoke API would (tests and measurements); a throttled invocation is
// retried, as the AWS SDK's retryer would.
func (s *Stack) Invoke(ctx context.Context, logicalID string, payload []byte) (answer []byte, functionError bool, err error) {
	lf := s.funcs[logicalID]
	if lf == nil {
		return nil, false, fmt.Errorf("no function %s", logicalID)
	}
	r := lf.Invoke(ctx, payload)
	return r.Payload, r.FunctionError, r.Err
}

// Throttles are the invocations Lambda's concurrency throttled so far, by
// function's logical id (retried ones counted each time).
func (s *Stack) Throttles() map[string]int { return s.account.Throttles() }

// Reserved is each function's reserved concurrency in this stack (after
// scaling), by logical id; functions without a reservation are absent.
func (s *Stack) Reserved() map[string]int {
	out := map[string]int{}
	for _, f := range s.Template.Functions {
		if f.Reserved >= 0 {
			out[f.LogicalID] = f.Reserved
		}
	}
	return out
}

// FireSchedules fires every EventBridge Scheduler schedule of the stack
// once, now, as if its time had come, and waits for the invocations (tests
// need not wait for a cron's next minute).
func (s *Stack) FireSchedules(ctx context.Context) { s.schedules.fireAll(ctx) }

// ColdStarts are the instances' initialisations so far.
func (s *Stack) ColdStarts() []ColdStart {
	s.coldMu.Lock()
	defer s.coldMu.Unlock()
	return append([]ColdStart(nil), s.cold...)
}

// report is <data-dir>/aws-calls.json: every request and every call (an
// IAM authorization), counted, and the refused ones; and the cold starts.
type report struct {
	// Requests counts the requests by function, service and operation.
	Requests   map[string]int `json:"requests"`
	Calls      []CallCount    `json:"calls"`
	Denied     []CallCount    `json:"denied"`
	ColdStarts []struct {
		Function string  `json:"function"`
		Millis   float64 `json:"ms"`
	} `json:"coldStarts"`
}

func (s *Stack) writeReport(dir string) error {
	return s.WriteReport(filepath.Join(dir, "aws-calls.json"))
}

// WriteReport writes what <data-dir>/aws-calls.json holds at exit to path:
// the calls so far (ReadCalls reads them back).
func (s *Stack) WriteReport(path string) error {
	var r report
	r.Requests = map[string]int{}
	for _, q := range s.Calls.Requests() {
		r.Requests[q.Function+" "+q.Service+" "+q.Operation]++
	}
	r.Calls = s.Calls.Summary()
	r.Denied = []CallCount{}
	for _, c := range r.Calls {
		if !c.Allowed {
			r.Denied = append(r.Denied, c)
		}
	}
	for _, c := range s.ColdStarts() {
		r.ColdStarts = append(r.ColdStarts, struct {
			Function string  `json:"function"`
			Millis   float64 `json:"ms"`
		}{c.Function, float64(c.Took.Microseconds()) / 1000})
	}
	b, _ := json.MarshalIndent(r, "", "  ")
	return fsutil.WriteFileAtomic(path, b)
}

func (s *Stack) serveRuntime(w http.ResponseWriter, r *http.Request) {
	parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), "/", 3)
	if len(parts) < 3 {
		http.NotFound(w, r)
		return
	}
	lf := s.funcs[parts[0]]
	n, err := strconv.Atoi(parts[1])
	if lf == nil || err != nil {
		http.NotFound(w, r)
		return
	}
	lf.serveRuntime(w, r, n, "/"+parts[2])
}

// functionOutput: what a function writes goes to its log group, as the
// Lambda service writes it with the function's role (checked as such),
// and to FunctionOutput.
func (s *Stack) functionOutput(f *Function, line string) {
	group := "/aws/lambda/" + f.Name
	stream := time.Now().UTC().Format("2006/01/02") + "/[$LATEST]local"
	res := logGroupARN(group) + ":log-stream:" + stream
	if s.authorize(f, "logs", "logs:PutLogEvents", res) {
		_ = s.logs.put(group, stream, true, []cwEvent{{Time: time.Now().UnixMilli(), Message: line}})
	}
	if s.out != nil {
		s.outMu.Lock()
		fmt.Fprintf(s.out, "[%s] %s\n", f.LogicalID, line)
		s.outMu.Unlock()
	} else {
		s.log.Debug("function output", "function", f.LogicalID, "line", line)
	}
}

// codeLogs: deployed code's output goes to the log group of its
// function's LoggingConfig (the bot and integration log groups).
func (s *Stack) codeLogs(config map[string]any, lines []string) {
	lc, _ := config["LoggingConfig"].(map[string]any)
	group, _ := lc["LogGroup"].(string)
	name, _ := config["FunctionName"].(string)
	if group == "" {
		group = "/aws/lambda/" + name
	}
	// The stream as Lambda names those of a custom log group, written
	// with the function's role as the admin function made it: its inline
	// policy within its permissions boundary. A role that does not allow
	// it loses the lines, as on AWS.
	stream := time.Now().UTC().Format("2006/01/02") + "/" + name + "[$LATEST]local"
	role, _ := config["Role"].(string)
	res := logGroupARN(group) + ":log-stream:" + stream
	ok := true
	for _, a := range []string{"logs:CreateLogStream", "logs:PutLogEvents"} {
		ok = s.authorizeCode(role, "logs", a, res) && ok
	}
	if !ok {
		return
	}
	now := time.Now().UnixMilli()
	evs := make([]cwEvent, 0, len(lines))
	for _, l := range lines {
		evs = append(evs, cwEvent{Time: now, Message: l})
	}
	_ = s.logs.put(group, stream, true, evs)
}

// authorizeCode records a call the Lambda service makes for deployed code
// with the role the admin function made for it (roleARN) and says whether
// the role allows it: its inline policies must, and its permissions
// boundary (the template's CodeBoundary) too. The call is recorded under
// the role's name.
func (s *Stack) authorizeCode(roleARN, svc, action, resource string) bool {
	name := roleARN[strings.LastIndex(roleARN, "/")+1:]
	req := iampolicy.Request{Action: action, Resource: resource}
	allowed := false
	refusedBy := "the role " + name
	if doc := s.code.Policy(name); doc != "" {
		var d struct{ Statement any }
		if json.Unmarshal([]byte(doc), &d) == nil {
			if st, err := iampolicy.ParseStatements(d.Statement); err == nil {
				dec, _ := iampolicy.Evaluate(st, req)
				allowed = dec == iampolicy.Allow
			}
		}
	}
	if b := s.code.Role(name).Get("PermissionsBoundary"); allowed && b != "" {
		st, known := s.Template.managedPolicy(b)
		dec, _ := iampolicy.Evaluate(st, req)
		if allowed = known && dec == iampolicy.Allow; !allowed {
			refusedBy = "the permissions boundary " + b
		}
	}
	if allowed {
		refusedBy = ""
	}
	s.Calls.add(Call{Function: name, Service: svc, Action: action, Resource: resource, Allowed: allowed, RefusedBy: refusedBy})
	return allowed
}

// authorize records a call made on a function's behalf and says whether
// its role allows it.
func (s *Stack) authorize(f *Function, svc, action, resource string) bool {
	d, by := f.allows(action, resource, nil)
	s.Calls.add(Call{Function: f.LogicalID, Service: svc, Action: action, Resource: resource, Allowed: d == iampolicy.Allow, RefusedBy: by})
	return d == iampolicy.Allow
}

// invokeAs invokes a function of the stack by its ARN as a service that
// assumed roleARN would (EventBridge Scheduler): the role must allow
// lambda:InvokeFunction on it.
func (s *Stack) invokeAs(ctx context.Context, roleARN, functionARN string, payload []byte) error {
	st, ok := s.roles[roleARN]
	role := roleARN[strings.LastIndex(roleARN, "/")+1:]
	allowed := false
	if ok {
		allowed, _ = evaluate(st, "lambda:InvokeFunction", functionARN, nil)
	}
	s.Calls.add(Call{Function: role, Service: "lambda", Action: "lambda:InvokeFunction", Resource: functionARN, Allowed: allowed})
	if !allowed {
		return fmt.Errorf("AccessDenied: %s may not invoke %s", roleARN, functionARN)
	}
	for _, lf := range s.funcs {
		if lf.fn.ARN == functionARN {
			res := lf.Invoke(ctx, payload)
			if res.Err != nil {
				return res.Err
			}
			if res.FunctionError {
				return fmt.Errorf("function error: %s", res.Payload)
			}
			return nil
		}
	}
	return fmt.Errorf("no function %s", functionARN)
}

// ruleLoop is a Schedule event of the template (an EventBridge rule): the
// function invoked with a scheduled event at each time.
func (s *Stack) ruleLoop(ctx context.Context, f *Function, expr string) {
	for {
		next, err := nextFire(expr, time.Now())
		if err != nil {
			s.log.Error("aws-local: schedule event", "function", f.LogicalID, "expression", expr, "err", err)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(next)):
		}
		go s.funcs[f.LogicalID].Invoke(ctx, scheduledEvent(f, next))
	}
}

// scheduledEvent is the event an EventBridge rule sends at time at.
func scheduledEvent(f *Function, at time.Time) []byte {
	ev, _ := json.Marshal(map[string]any{
		"version": "0", "id": randomHex(16), "detail-type": "Scheduled Event", "source": "aws.events",
		"account": Account, "time": at.UTC().Format(time.RFC3339), "region": Region,
		"resources": []string{"arn:aws:events:" + Region + ":" + Account + ":rule/" + f.Name + "-schedule"}, "detail": map[string]any{},
	})
	return ev
}

// FireRules fires every Schedule event of the template's functions (the
// dispatcher's retries, the sweeper's runs) once, now, as its rule would,
// and waits for each invocation: tests need not wait five minutes. It
// returns the function errors.
func (s *Stack) FireRules(ctx context.Context) error {
	var errs []error
	for _, f := range s.Template.Functions {
		for range f.Schedule {
			r := s.funcs[f.LogicalID].Invoke(ctx, scheduledEvent(f, time.Now()))
			switch {
			case r.Err != nil:
				errs = append(errs, fmt.Errorf("%s: %w", f.LogicalID, r.Err))
			case r.FunctionError:
				errs = append(errs, fmt.Errorf("%s: function error: %s", f.LogicalID, r.Payload))
			}
		}
	}
	return errors.Join(errs...)
}

// objectCreated is the bucket's notification: an object-created event to
// the function whose S3 event matches it. It is delivered before the PUT
// is answered (AWS delivers within about a second, after it): see
// docs/deploy.md.
func (s *Stack) objectCreated(ctx context.Context, obj locals3.PutObject) error {
	for _, f := range s.Template.Functions {
		src := f.S3
		if src == nil || src.Bucket != obj.Bucket || !strings.HasPrefix(obj.Key, src.Prefix) || !strings.HasSuffix(obj.Key, src.Suffix) {
			continue
		}
		if !matchesAny(src.Events, "s3:ObjectCreated:Put") {
			continue
		}
		now := time.Now().UTC()
		ev, _ := json.Marshal(map[string]any{"Records": []any{map[string]any{
			"eventVersion": "2.1", "eventSource": "aws:s3", "awsRegion": Region, "eventTime": now.Format("2006-01-02T15:04:05.000Z"),
			"eventName": "ObjectCreated:Put", "userIdentity": map[string]string{"principalId": "AWS:LOCAL"},
			"s3": map[string]any{"s3SchemaVersion": "1.0", "configurationId": f.LogicalID + "Uploaded",
				"bucket": map[string]any{"name": obj.Bucket, "arn": "arn:aws:s3:::" + obj.Bucket},
				"object": map[string]any{"key": s3EventKey(obj.Key), "size": obj.Size, "sequencer": strconv.FormatInt(now.UnixNano(), 16)}},
		}}})
		res := s.funcs[f.LogicalID].Invoke(ctx, ev)
		if res.Err != nil || res.FunctionError {
			s.log.Warn("aws-local: S3 event: the function failed", "function", f.LogicalID, "key", obj.Key, "err", res.Err, "answer", string(res.Payload))
		}
	}
	return nil
}

// s3EventKey encodes a key as S3 events do (form encoding: a space is +).
func s3EventKey(k string) string { return url.QueryEscape(k) }

func matchesAny(patterns []string, v string) bool {
	for _, p := range patterns {
		if wildcard(p, v) {
			return true
		}
	}
	return false
}

func reverseProxy(endpoint string) (http.Handler, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("endpoint %q: not a URL", endpoint)
	}
	p := httputil.NewSingleHostReverseProxy(u)
	// The request keeps the Host its client signed.
	d := p.Director
	p.Director = func(r *http.Request) { host := r.Host; d(r); r.Host = host }
	return p, nil
}

// ensureBucket creates the stack's bucket in an external S3 when missing.
func ensureBucket(ctx context.Context, h http.Handler, bucket string, sec secrets) error {
	client := s3store.New(awss3.New(awss3.Options{Region: Region, BaseEndpoint: aws.String("http://s3.local"), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(sec.AccessKey, sec.SecretKey, ""),
		HTTPClient:  &http.Client{Transport: runtime.InProcess(h)}}), bucket, s3store.Options{})
	return client.EnsureBucket(ctx, Region)
}

// bootstrap makes the first account and its token on first start, and
// writes the token to <dataDir>/admin-token, as the local platform does.
func bootstrap(ctx context.Context, store *dynamo.Store, dataDir string, first *string) error {
	path := filepath.Join(dataDir, "admin-token")
	if fileExists(path) {
		return nil
	}
	acct, _, err := store.EnsureAccount(ctx, AdminEmail)
	if err != nil {
		return err
	}
	t, err := store.CreatePAT(ctx, acct.ID, "aws-local admin")
	if err != nil {
		return err
	}
	if err := fsutil.WriteFileAtomic(path, []byte(t.Value)); err != nil {
		return err
	}
	*first = t.Value
	return nil
}

// host is what the Lambda stand-in of deployed code needs of its user: a
// scratch directory per invocation, and where to report errors.
type host struct {
	dir string
	log *slog.Logger
	mu  sync.Mutex
	n   int
}

func (h *host) TempDir() string {
	h.mu.Lock()
	h.n++
	n := h.n
	h.mu.Unlock()
	d := filepath.Join(h.dir, strconv.Itoa(n))
	_ = os.RemoveAll(d)
	// An invocation's directory is done with long before 64 more start.
	_ = os.RemoveAll(filepath.Join(h.dir, strconv.Itoa(n-64)))
	_ = os.MkdirAll(d, 0o700)
	return d
}
func (h *host) Errorf(format string, args ...any) {
	h.log.Error("aws-local: code: " + fmt.Sprintf(format, args...))
}
func (h *host) Fatal(args ...any) { h.log.Error("aws-local: code: " + fmt.Sprint(args...)) }
func (h *host) Cleanup(func())    {}

// CustomResourceAnswer is what a custom resource's function answered
// CloudFormation.
type CustomResourceAnswer struct {
	LogicalID string
	Status    string // SUCCESS or FAILED
	Reason    string
}

// DeleteCustomResources does what CloudFormation does to the template's
// custom resources when the stack is deleted: each gets a Delete request,
// its ServiceToken (a function of the stack) invoked with it, and must
// answer at the request's ResponseURL (a presigned S3 URL on AWS; here a
// listener of this call's) before the invocation ends. The answers, in the
// template's order of logical ids.
func (s *Stack) DeleteCustomResources(ctx context.Context) ([]CustomResourceAnswer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	answers := map[string][]byte{}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		answers[strings.TrimPrefix(r.URL.Path, "/")] = b
		mu.Unlock()
	})}
	go srv.Serve(ln)
	defer srv.Close()
	var ids []string
	for id := range s.Template.resources {
		if strings.HasPrefix(s.Template.typeOf(id), "Custom::") || s.Template.typeOf(id) == "AWS::CloudFormation::CustomResource" {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	var out []CustomResourceAnswer
	for _, id := range ids {
		token, err := s.Template.str(s.Template.props(id)["ServiceToken"])
		if err != nil {
			return out, fmt.Errorf("%s: ServiceToken: %w", id, err)
		}
		var fn *Function
		for _, f := range s.Template.Functions {
			if f.ARN == token {
				fn = f
			}
		}
		if fn == nil {
			return out, fmt.Errorf("%s: ServiceToken %s is no function of the stack", id, token)
		}
		props, _ := s.Template.resolve(s.Template.props(id))
		ev, _ := json.Marshal(map[string]any{
			"RequestType": "Delete", "RequestId": randomHex(16), "ResponseURL": "http://" + ln.Addr().String() + "/" + id + "?X-Amz-Signature=local",
			"ResourceType": s.Template.typeOf(id), "LogicalResourceId": id, "PhysicalResourceId": physical(id),
			"StackId": StackID, "ServiceToken": token, "ResourceProperties": props,
		})
		r := s.funcs[fn.LogicalID].Invoke(ctx, ev)
		if r.Err != nil || r.FunctionError {
			return out, fmt.Errorf("%s: %s: %v %s", id, fn.LogicalID, r.Err, r.Payload)
		}
		mu.Lock()
		raw := answers[id]
		mu.Unlock()
		var a struct{ Status, Reason string }
		if err := json.Unmarshal(raw, &a); err != nil {
			return out, fmt.Errorf("%s: %s did not answer CloudFormation before its end (%q)", id, fn.LogicalID, raw)
		}
		out = append(out, CustomResourceAnswer{LogicalID: id, Status: a.Status, Reason: a.Reason})
	}
	return out, nil
}
