// Package lambdarunner runs deployed code on AWS: one Lambda function per
// deployed bot and per integration version (Node.js 22, arm64), created or
// updated by the admin function when the code or its secrets change, and
// invoked by everything that calls a bot or an integration (the
// dispatcher, recurring events, webhooks, callAction, registrations). It
// implements platform.CodeRunner and platform.CodeDeployer.
//
// A call to deployed code is an ordinary delivery (shared/delivery) to an
// address of the form http://lambda.invalid/<function>/<version>/<seal>: the
// client's transport (Runner.Transport) turns a request to that host into
// a Lambda Invoke of the function, whose entry (entry.cjs) hands it to the
// bundle as the local worker does, and turns the function's answer back
// into the HTTP response. ".invalid" never resolves (RFC 6761): a client
// without the transport cannot reach anything with such an address.
//
// Each function has its own execution role, created under a fixed IAM
// path with the stack's permissions boundary; its only permission is to
// write its own log streams in the bot or integration log group (see
// docs/deploy.md for why, and for the admin function's IAM conditions).
package lambdarunner

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"
	smithy "github.com/aws/smithy-go"

	"github.com/botforge/platform/shared/platform"
)

//go:embed entry.cjs
var entry []byte

// Entry is the function's entry file (index.cjs), for tests.
func Entry() []byte { return entry }

// Host is the host of the addresses of deployed code.
const Host = "lambda.invalid"

// LambdaAPI is the part of the Lambda client the runner uses.
type LambdaAPI interface {
	GetFunction(ctx context.Context, in *lambda.GetFunctionInput, opts ...func(*lambda.Options)) (*lambda.GetFunctionOutput, error)
	CreateFunction(ctx context.Context, in *lambda.CreateFunctionInput, opts ...func(*lambda.Options)) (*lambda.CreateFunctionOutput, error)
	UpdateFunctionCode(ctx context.Context, in *lambda.UpdateFunctionCodeInput, opts ...func(*lambda.Options)) (*lambda.UpdateFunctionCodeOutput, error)
	UpdateFunctionConfiguration(ctx context.Context, in *lambda.UpdateFunctionConfigurationInput, opts ...func(*lambda.Options)) (*lambda.UpdateFunctionConfigurationOutput, error)
	DeleteFunction(ctx context.Context, in *lambda.DeleteFunctionInput, opts ...func(*lambda.Options)) (*lambda.DeleteFunctionOutput, error)
	PutFunctionConcurrency(ctx context.Context, in *lambda.PutFunctionConcurrencyInput, opts ...func(*lambda.Options)) (*lambda.PutFunctionConcurrencyOutput, error)
	DeleteFunctionConcurrency(ctx context.Context, in *lambda.DeleteFunctionConcurrencyInput, opts ...func(*lambda.Options)) (*lambda.DeleteFunctionConcurrencyOutput, error)
	Invoke(ctx context.Context, in *lambda.InvokeInput, opts ...func(*lambda.Options)) (*lambda.InvokeOutput, error)
}

// IAMAPI is the part of the IAM client the runner uses (the admin
// function's only).
type IAMAPI interface {
	CreateRole(ctx context.Context, in *iam.CreateRoleInput, opts ...func(*iam.Options)) (*iam.CreateRoleOutput, error)
	GetRole(ctx context.Context, in *iam.GetRoleInput, opts ...func(*iam.Options)) (*iam.GetRoleOutput, error)
	PutRolePolicy(ctx context.Context, in *iam.PutRolePolicyInput, opts ...func(*iam.Options)) (*iam.PutRolePolicyOutput, error)
	DeleteRolePolicy(ctx context.Context, in *iam.DeleteRolePolicyInput, opts ...func(*iam.Options)) (*iam.DeleteRolePolicyOutput, error)
	DeleteRole(ctx context.Context, in *iam.DeleteRoleInput, opts ...func(*iam.Options)) (*iam.DeleteRoleOutput, error)
}

// Source is what a deployment needs from the platform: the bundle's bytes
// and a key scoped to the bot or the integration the code acts as (never
// an account's).
type Source interface {
	Code(ctx context.Context, key string) ([]byte, error)
	BotToken(ctx context.Context, b platform.Bot) (Key, error)
	IntegrationToken(ctx context.Context, i platform.Integration) (Key, error)
}

// Key is a key minted for a function: RevokeOthers revokes the keys
// earlier deployments of the same bot or integration minted (called once
// the function holds this one), Revoke this one (the function was not
// made with it).
type Key struct {
	Token                string
	RevokeOthers, Revoke func()
}

// Defaults of a Runner.
const (
	Runtime        = types.RuntimeNodejs22x
	DefaultMemory  = 256
	DefaultTimeout = 120 // seconds: a delivery may take up to 2 minutes
	policyName     = "own-logs"
	descPrefix     = DescriptionPrefix
)

// DescriptionPrefix begins the description of every function a Runner
// makes: what tells them from other functions whose names share the
// prefix (shared/teardown deletes only these).
const DescriptionPrefix = "botforge deployed code "

// Runner is the AWS code runner. Every function of the stack that calls
// deployed code has one (BotURL, IntegrationURL, Transport); only the admin
// function's has IAM and Source and deploys (DeployBot ...).
type Runner struct {
	Lambda LambdaAPI
	IAM    IAMAPI // nil: this runner cannot deploy
	Source Source
	// Prefix names the functions and their roles: <Prefix>bot-<id>,
	// <Prefix>int-<id> (PLATFORM_CODE_PREFIX, "<stack>-code-").
	Prefix string
	// RolePath is the IAM path of the functions' roles ("/<stack>-code/"),
	// BoundaryARN the permissions boundary every role gets.
	RolePath, BoundaryARN string
	// BotLogGroup and IntegrationLogGroup receive the functions' logs; the
	// roles may write only their own streams there (LogsARN prefixes the
	// group names: "arn:aws:logs:<region>:<account>:log-group:").
	BotLogGroup, IntegrationLogGroup, LogsARN string
	// MaxReservedConcurrency caps the reserved concurrency an integration's
	// maxConcurrency reserves for its function (the operator's
	// PLATFORM_CODE_MAX_RESERVED_CONCURRENCY): min(maxConcurrency, cap), so
	// no developer reserves the account's concurrency away from the other
	// tenants' code. 0 (the zero value): no function is given any.
	MaxReservedConcurrency int32
	Memory, Timeout        int32
	Architecture           types.Architecture // default arm64
	// Poll is the interval of the waits for a function to be Active or
	// updated (default 1 s); Wait bounds them (default 20 s); RoleWait
	// bounds the retries while a new role is not yet assumable (IAM is
	// eventually consistent; default 15 s). The admin function answers
	// within API Gateway's 30 s: a deployment cut short is finished by the
	// next (every step is idempotent).
	Poll, Wait, RoleWait time.Duration

	keyOnce sync.Once
	key     []byte // seals the addresses this runner issues
}

// FunctionName is the name of the function (and of its role) of a bot
// ("bot") or an integration version ("int"): the prefix and the id (which
// says its kind: bot_..., intver_...), or, where that is longer than
// Lambda and IAM allow (64), the prefix, the kind's letter and as much of
// the id's SHA-256 as fits.
func (r *Runner) FunctionName(kind, id string) (string, error) {
	if name := r.Prefix + id; len(name) <= 64 {
		return name, nil
	}
	room := 64 - len(r.Prefix) - 1
	if room < 20 {
		return "", fmt.Errorf("PLATFORM_CODE_PREFIX %q is too long to name functions (at most 43 characters)", r.Prefix)
	}
	h := sha256.Sum256([]byte(id))
	return r.Prefix + kind[:1] + hex.EncodeToString(h[:])[:room], nil
}

// Version names what a function runs: its code and its secrets.
func Version(codeKey string, secrets map[string]string) string {
	names := make([]string, 0, len(secrets))
	for k := range secrets {
		names = append(names, k)
	}
	sort.Strings(names)
	h := sha256.New()
	fmt.Fprintf(h, "%d:%s", len(codeKey), codeKey)
	for _, k := range names {
		fmt.Fprintf(h, "%d:%s%d:%s", len(k), k, len(secrets[k]), secrets[k])
	}
	return hex.EncodeToString(h.Sum(nil))[:24]
}

func (r *Runner) address(kind, id, codeKey string, secrets map[string]string) (string, error) {
	name, err := r.FunctionName(kind, id)
	if err != nil {
		return "", platform.Errorf(platform.ErrBadGateway, "%v", err)
	}
	v := Version(codeKey, secrets)
	return "http://" + Host + "/" + name + "/" + v + "/" + r.seal(name, v), nil
}

// seal is the proof that this runner issued an address: an HMAC of the
// function and version under a key of this process. The transport invokes
// only sealed addresses, so a bot or integration whose url a user set to
// http://lambda.invalid/<another tenant's function>/... invokes nothing.
func (r *Runner) seal(name, version string) string {
	r.keyOnce.Do(func() {
		r.key = make([]byte, 32)
		if _, err := rand.Read(r.key); err != nil {
			panic(err)
		}
	})
	m := hmac.New(sha256.New, r.key)
	m.Write([]byte(name + "/" + version))
	return hex.EncodeToString(m.Sum(nil))
}

// BotURL is the address of the bot's function (platform.CodeRunner).
func (r *Runner) BotURL(_ context.Context, b platform.Bot) (string, error) {
	if b.CodeKey == "" {
		return "", platform.Errorf(platform.ErrBadGateway, "the bot's code was deployed by an earlier version of the platform: deploy it again")
	}
	return r.address("bot", b.ID, b.CodeKey, b.SecretValues)
}

// IntegrationURL is the address of the integration version's function.
func (r *Runner) IntegrationURL(_ context.Context, i platform.Integration) (string, error) {
	return r.address("int", i.ID, i.CodeKey, i.SecretValues)
}

// spec is what one function must be.
type spec struct {
	name, version, codeKey, logGroup string
	env                              map[string]string
	// concurrency > 0: the function's reserved concurrency (an
	// integration's maxConcurrency); 0: none.
	concurrency int32
	token       func(ctx context.Context) (Key, error)
}

// DeployBot makes the bot's function run its code and secrets
// (platform.CodeDeployer); apiURL is the platform's base URL as the code
// reaches it (BP_API_URL).
func (r *Runner) DeployBot(ctx context.Context, b platform.Bot, apiURL string) error {
	name, err := r.FunctionName("bot", b.ID)
	if err != nil {
		return err
	}
	env := secretsEnv(b.SecretValues)
	env["BP_BOT_ID"] = b.ID
	env["BP_API_URL"] = apiURL
	return r.deploy(ctx, spec{name: name, version: Version(b.CodeKey, b.SecretValues), codeKey: b.CodeKey, logGroup: r.BotLogGroup, env: env,
		token: func(ctx context.Context) (Key, error) { return r.Source.BotToken(ctx, b) }})
}

// DeployIntegration makes the integration version's function run its code
// and secrets.
func (r *Runner) DeployIntegration(ctx context.Context, i platform.Integration, apiURL string) error {
	name, err := r.FunctionName("int", i.ID)
	if err != nil {
		return err
	}
	env := secretsEnv(i.SecretValues)
	env["BP_INTEGRATION_ID"] = i.ID
	env["BP_API_URL"] = apiURL
	env["BP_WEBHOOK_URL"] = strings.TrimRight(apiURL, "/") + "/webhooks"
	var conc int32
	if i.MaxConcurrency != nil && *i.MaxConcurrency > 0 && r.MaxReservedConcurrency > 0 {
		conc = int32(min(*i.MaxConcurrency, int64(r.MaxReservedConcurrency)))
	}
	return r.deploy(ctx, spec{name: name, version: Version(i.CodeKey, i.SecretValues), codeKey: i.CodeKey, logGroup: r.IntegrationLogGroup, env: env, concurrency: conc,
		token: func(ctx context.Context) (Key, error) { return r.Source.IntegrationToken(ctx, i) }})
}

// RemoveBot deletes the bot's function and role (none: nothing to do).
func (r *Runner) RemoveBot(ctx context.Context, botID string) error {
	return r.remove(ctx, "bot", botID)
}

// RemoveIntegration deletes the integration version's function and role.
func (r *Runner) RemoveIntegration(ctx context.Context, id string) error {
	return r.remove(ctx, "int", id)
}

func secretsEnv(secrets map[string]string) map[string]string {
	env := map[string]string{}
	for k, v := range secrets {
		env["SECRET_"+k] = v
	}
	return env
}

func (r *Runner) deploy(ctx context.Context, s spec) error {
	if r.IAM == nil || r.Source == nil {
		return errors.New("this function cannot deploy code (no IAM client or source)")
	}
	cur, err := r.Lambda.GetFunction(ctx, &lambda.GetFunctionInput{FunctionName: &s.name})
	var nf *types.ResourceNotFoundException
	switch {
	case errors.As(err, &nf):
		cur = nil
	case err != nil:
		return fmt.Errorf("get function %s: %w", s.name, err)
	}
	desc := descPrefix + s.version
	if cur == nil || cur.Configuration == nil || aws.ToString(cur.Configuration.Description) != desc ||
		envOf(cur.Configuration)["BP_API_URL"] != s.env["BP_API_URL"] || cur.Configuration.LastUpdateStatus == types.LastUpdateStatusFailed {
		if err := r.deployCode(ctx, s, cur, desc); err != nil {
			return err
		}
	}
	return r.applyConcurrency(ctx, s, cur)
}

// applyConcurrency makes the function's reserved concurrency the
// integration's maxConcurrency capped by MaxReservedConcurrency (none
// without one, or with a cap of 0): invocations beyond are
// throttled, which callers get as a retryable 503. An account whose
// unreserved concurrency cannot spare it refuses: the deployment fails
// saying so (and the next one tries again).
func (r *Runner) applyConcurrency(ctx context.Context, s spec, cur *lambda.GetFunctionOutput) error {
	var have int32
	if cur != nil && cur.Concurrency != nil {
		have = aws.ToInt32(cur.Concurrency.ReservedConcurrentExecutions)
	}
	if have == s.concurrency {
		return nil
	}
	if s.concurrency > 0 {
		if _, err := r.Lambda.PutFunctionConcurrency(ctx, &lambda.PutFunctionConcurrencyInput{FunctionName: &s.name, ReservedConcurrentExecutions: aws.Int32(s.concurrency)}); err != nil {
			return fmt.Errorf("maxConcurrency %d could not be applied as the reserved concurrency of %s: %w", s.concurrency, s.name, err)
		}
		return nil
	}
	if _, err := r.Lambda.DeleteFunctionConcurrency(ctx, &lambda.DeleteFunctionConcurrencyInput{FunctionName: &s.name}); err != nil {
		return fmt.Errorf("remove the reserved concurrency of %s: %w", s.name, err)
	}
	return nil
}

// deployCode creates the function or updates its code and configuration.
func (r *Runner) deployCode(ctx context.Context, s spec, cur *lambda.GetFunctionOutput, desc string) error {
	code, err := r.Source.Code(ctx, s.codeKey)
	if err != nil {
		return fmt.Errorf("read the deployed code: %w", err)
	}
	zipped, err := Zip(code)
	if err != nil {
		return err
	}
	env := map[string]string{"BP_CODE_VERSION": s.version, "NODE_ENV": "production"}
	for k, v := range s.env {
		env[k] = v
	}
	if cur == nil {
		roleARN, err := r.ensureRole(ctx, s)
		if err != nil {
			return err
		}
		key, err := s.token(ctx)
		if err != nil {
			return fmt.Errorf("a key for the deployed code: %w", err)
		}
		env["BP_TOKEN"] = key.Token
		created, err := r.create(ctx, s, roleARN, desc, env, zipped)
		switch {
		case !created:
			// Made by none, or by a concurrent deployment with its own key.
			if key.Revoke != nil {
				key.Revoke()
			}
		case key.RevokeOthers != nil:
			key.RevokeOthers()
		}
		return err
	}
	// An update keeps the function's key (it acts as the same bot or
	// integration); one missing (a function made otherwise) is minted.
	var revokeOthers func()
	if tok := envOf(cur.Configuration)["BP_TOKEN"]; tok != "" {
		env["BP_TOKEN"] = tok
	} else {
		key, err := s.token(ctx)
		if err != nil {
			return fmt.Errorf("a key for the deployed code: %w", err)
		}
		env["BP_TOKEN"], revokeOthers = key.Token, key.RevokeOthers
	}
	if err := r.waitUpdated(ctx, s.name); err != nil {
		return err
	}
	if _, err := r.Lambda.UpdateFunctionCode(ctx, &lambda.UpdateFunctionCodeInput{FunctionName: &s.name, ZipFile: zipped}); err != nil {
		return fmt.Errorf("update the code of %s: %w", s.name, err)
	}
	if err := r.waitUpdated(ctx, s.name); err != nil {
		return err
	}
	// The description (the version) changes last: a deployment that stops
	// half-way is done again by the next.
	if _, err := r.Lambda.UpdateFunctionConfiguration(ctx, &lambda.UpdateFunctionConfigurationInput{
		FunctionName: &s.name, Description: &desc, Environment: &types.Environment{Variables: env},
		MemorySize: aws.Int32(r.memory()), Timeout: aws.Int32(r.timeout()),
		LoggingConfig: &types.LoggingConfig{LogGroup: &s.logGroup, LogFormat: types.LogFormatText},
	}); err != nil {
		return fmt.Errorf("update the configuration of %s: %w", s.name, err)
	}
	if err := r.waitUpdated(ctx, s.name); err != nil {
		return err
	}
	if revokeOthers != nil {
		revokeOthers()
	}
	return nil
}

func envOf(c *types.FunctionConfiguration) map[string]string {
	if c == nil || c.Environment == nil {
		return map[string]string{}
	}
	return c.Environment.Variables
}

func (r *Runner) memory() int32 {
	if r.Memory > 0 {
		return r.Memory
	}
	return DefaultMemory
}

func (r *Runner) timeout() int32 {
	if r.Timeout > 0 {
		return r.Timeout
	}
	return DefaultTimeout
}

func (r *Runner) arch() types.Architecture {
	if r.Architecture != "" {
		return r.Architecture
	}
	return types.ArchitectureArm64
}

func (r *Runner) poll() time.Duration {
	if r.Poll > 0 {
		return r.Poll
	}
	return time.Second
}

// create creates the function, retrying while its new role cannot be
// assumed yet, and waits until it is Active; created tells whether this
// call made it (with env's key).
func (r *Runner) create(ctx context.Context, s spec, roleARN, desc string, env map[string]string, zipped []byte) (created bool, err error) {
	roleWait := r.RoleWait
	if roleWait <= 0 {
		roleWait = 15 * time.Second
	}
	deadline := time.Now().Add(roleWait)
	in := &lambda.CreateFunctionInput{
		FunctionName: &s.name, Role: &roleARN, Runtime: Runtime, Handler: aws.String("index.handler"),
		Architectures: []types.Architecture{r.arch()}, Code: &types.FunctionCode{ZipFile: zipped},
		Description: &desc, MemorySize: aws.Int32(r.memory()), Timeout: aws.Int32(r.timeout()),
		Environment:   &types.Environment{Variables: env},
		LoggingConfig: &types.LoggingConfig{LogGroup: &s.logGroup, LogFormat: types.LogFormatText},
	}
	for {
		_, err := r.Lambda.CreateFunction(ctx, in)
		var inv *types.InvalidParameterValueException
		if err != nil && errors.As(err, &inv) && strings.Contains(aws.ToString(inv.Message), "cannot be assumed") && time.Now().Before(deadline) {
			select {
			case <-ctx.Done():
				return false, ctx.Err()
			case <-time.After(r.poll()):
			}
			continue
		}
		var conflict *types.ResourceConflictException
		if errors.As(err, &conflict) {
			// Created concurrently (another deployment of the same bot,
			// with its own key): that one stands; deploying again updates it.
			return false, fmt.Errorf("function %s is being created by another deployment: deploy again", s.name)
		}
		if err != nil {
			return false, fmt.Errorf("create function %s: %w", s.name, err)
		}
		return true, r.waitActive(ctx, s.name)
	}
}

func (r *Runner) wait(ctx context.Context, name string, done func(*types.FunctionConfiguration) (bool, error)) error {
	limit := r.Wait
	if limit <= 0 {
		limit = 20 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		out, err := r.Lambda.GetFunction(ctx, &lambda.GetFunctionInput{FunctionName: &name})
		if err != nil {
			return fmt.Errorf("get function %s: %w", name, err)
		}
		ok, err := done(out.Configuration)
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("function %s: not ready within %s", name, limit)
		case <-time.After(r.poll()):
		}
	}
}

func (r *Runner) waitActive(ctx context.Context, name string) error {
	return r.wait(ctx, name, func(c *types.FunctionConfiguration) (bool, error) {
		if c == nil {
			return false, nil
		}
		switch c.State {
		case types.StateActive, "":
			return true, nil
		case types.StateFailed:
			return false, fmt.Errorf("function %s failed to become active: %s", name, aws.ToString(c.StateReason))
		}
		return false, nil
	})
}

func (r *Runner) waitUpdated(ctx context.Context, name string) error {
	return r.wait(ctx, name, func(c *types.FunctionConfiguration) (bool, error) {
		if c == nil {
			return false, nil
		}
		if c.State == types.StatePending {
			return false, nil
		}
		// A failed earlier update does not stop the next one.
		return c.LastUpdateStatus != types.LastUpdateStatusInProgress, nil
	})
}

// ensureRole creates the function's role (under RolePath, with the
// boundary) and its one inline policy: write its own log streams.
func (r *Runner) ensureRole(ctx context.Context, s spec) (string, error) {
	trust := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"lambda.amazonaws.com"},"Action":"sts:AssumeRole"}]}`
	var arn string
	out, err := r.IAM.CreateRole(ctx, &iam.CreateRoleInput{
		RoleName: &s.name, Path: aws.String(r.RolePath), AssumeRolePolicyDocument: &trust,
		PermissionsBoundary: aws.String(r.BoundaryARN),
		Description:         aws.String("Deployed code " + s.name + ": writes its own logs only"),
	})
	var exists *iamtypes.EntityAlreadyExistsException
	switch {
	case errors.As(err, &exists):
		got, gerr := r.IAM.GetRole(ctx, &iam.GetRoleInput{RoleName: &s.name})
		if gerr != nil {
			return "", fmt.Errorf("get role %s: %w", s.name, gerr)
		}
		arn = aws.ToString(got.Role.Arn)
	case err != nil:
		return "", fmt.Errorf("create role %s: %w", s.name, err)
	default:
		arn = aws.ToString(out.Role.Arn)
	}
	policy, err := json.Marshal(map[string]any{
		"Version": "2012-10-17",
		"Statement": []map[string]any{{
			"Effect": "Allow", "Action": []string{"logs:CreateLogStream", "logs:PutLogEvents"},
			// Lambda names the streams of a custom log group
			// YYYY/MM/DD/<function>[<version>]<instance>.
			"Resource": r.LogsARN + s.logGroup + ":log-stream:*/" + s.name + "[*",
		}},
	})
	if err != nil {
		return "", err
	}
	if _, err := r.IAM.PutRolePolicy(ctx, &iam.PutRolePolicyInput{RoleName: &s.name, PolicyName: aws.String(policyName), PolicyDocument: aws.String(string(policy))}); err != nil {
		return "", fmt.Errorf("put the policy of role %s: %w", s.name, err)
	}
	return arn, nil
}

func (r *Runner) remove(ctx context.Context, kind, id string) error {
	name, err := r.FunctionName(kind, id)
	if err != nil {
		return err
	}
	var nf *types.ResourceNotFoundException
	_, err = r.Lambda.DeleteFunction(ctx, &lambda.DeleteFunctionInput{FunctionName: &name})
	if err != nil && !errors.As(err, &nf) {
		return fmt.Errorf("delete function %s: %w", name, err)
	}
	functionGone := err != nil
	if r.IAM == nil {
		return nil
	}
	var none *iamtypes.NoSuchEntityException
	if _, err := r.IAM.DeleteRolePolicy(ctx, &iam.DeleteRolePolicyInput{RoleName: &name, PolicyName: aws.String(policyName)}); err != nil && !errors.As(err, &none) {
		// IAM names a role that does not exist without its path, which
		// the admin role's permissions (roles under RolePath) cannot
		// match: AccessDenied, not NoSuchEntity. With no function either,
		// the bot or integration never had code deployed: nothing to
		// remove (the AWS-shaped local stack, shared/awslocal, found this).
		var denied smithy.APIError
		if !functionGone || !errors.As(err, &denied) || denied.ErrorCode() != "AccessDenied" {
			return fmt.Errorf("delete the policy of role %s: %w", name, err)
		}
		return nil
	}
	if _, err := r.IAM.DeleteRole(ctx, &iam.DeleteRoleInput{RoleName: &name}); err != nil && !errors.As(err, &none) {
		return fmt.Errorf("delete role %s: %w", name, err)
	}
	return nil
}

// Zip is the function's package: the entry (index.cjs) and the bundle
// (bundle.cjs).
func Zip(code []byte) ([]byte, error) {
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	for _, f := range []struct {
		name string
		data []byte
	}{{"index.cjs", entry}, {"bundle.cjs", code}} {
		h := &zip.FileHeader{Name: f.name, Method: zip.Deflate, Modified: time.Unix(0, 0).UTC()}
		h.SetMode(0o644) // Lambda's runtime user must read them
		fw, err := w.CreateHeader(h)
		if err != nil {
			return nil, err
		}
		if _, err := fw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
