// Package teardown removes, when the stack is deleted, what the admin
// function made at run time and CloudFormation does not know: deployed
// code's Lambda functions (named <stack>-code-*) and their IAM roles (under
// the path /<stack>-code/), shared/lambdarunner's. It is the handler of a
// CloudFormation custom resource (template.yaml's CodeTeardown): Create and
// Update do nothing, Delete removes them; CloudFormation deletes the
// resource after the admin function (which could make more) and before
// CodeBoundary (which a role still using it would keep from deletion).
package teardown

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/botforge/platform/shared/lambdarunner"
)

// LambdaAPI is the part of the Lambda client the teardown uses.
type LambdaAPI interface {
	ListFunctions(ctx context.Context, in *lambda.ListFunctionsInput, opts ...func(*lambda.Options)) (*lambda.ListFunctionsOutput, error)
	DeleteFunction(ctx context.Context, in *lambda.DeleteFunctionInput, opts ...func(*lambda.Options)) (*lambda.DeleteFunctionOutput, error)
}

// IAMAPI is the part of the IAM client the teardown uses.
type IAMAPI interface {
	ListRoles(ctx context.Context, in *iam.ListRolesInput, opts ...func(*iam.Options)) (*iam.ListRolesOutput, error)
	ListRolePolicies(ctx context.Context, in *iam.ListRolePoliciesInput, opts ...func(*iam.Options)) (*iam.ListRolePoliciesOutput, error)
	DeleteRolePolicy(ctx context.Context, in *iam.DeleteRolePolicyInput, opts ...func(*iam.Options)) (*iam.DeleteRolePolicyOutput, error)
	DeleteRole(ctx context.Context, in *iam.DeleteRoleInput, opts ...func(*iam.Options)) (*iam.DeleteRoleOutput, error)
}

// Teardown deletes deployed code's functions and roles.
type Teardown struct {
	Lambda LambdaAPI
	IAM    IAMAPI
	// Prefix and RolePath are the admin function's PLATFORM_CODE_PREFIX
	// and PLATFORM_CODE_ROLE_PATH ("<stack>-code-", "/<stack>-code/").
	Prefix, RolePath string
	// HTTP answers CloudFormation (the request's ResponseURL); nil:
	// http.DefaultClient.
	HTTP *http.Client
	Log  *slog.Logger
}

// Reserve is the time the handler keeps, before the invocation's end, to
// answer CloudFormation: a teardown still running then is abandoned and
// answered FAILED, so the stack's deletion stops (and can be run again)
// rather than wait an hour for an answer that never comes.
const Reserve = 15 * time.Second

// Delete deletes every function named with Prefix that a Runner made
// (its description says so: another stack's functions may share the
// prefix) and every role whose path is RolePath, with its inline policies.
// What is already gone is skipped; it answers how many functions and
// roles it deleted, and on error what it could not.
func (t *Teardown) Delete(ctx context.Context) (functions, roles int, err error) {
	if t.Prefix == "" || t.RolePath == "" {
		return 0, 0, errors.New("PLATFORM_CODE_PREFIX and PLATFORM_CODE_ROLE_PATH must be set")
	}
	var errs []error
	var marker *string
	for {
		page, err := t.Lambda.ListFunctions(ctx, &lambda.ListFunctionsInput{Marker: marker})
		if err != nil {
			return functions, roles, fmt.Errorf("list functions: %w", err)
		}
		for _, f := range page.Functions {
			name := aws.ToString(f.FunctionName)
			if !strings.HasPrefix(name, t.Prefix) || !strings.HasPrefix(aws.ToString(f.Description), lambdarunner.DescriptionPrefix) {
				continue
			}
			var nf *types.ResourceNotFoundException
			if _, err := t.Lambda.DeleteFunction(ctx, &lambda.DeleteFunctionInput{FunctionName: &name}); err != nil && !errors.As(err, &nf) {
				errs = append(errs, fmt.Errorf("delete function %s: %w", name, err))
				continue
			}
			functions++
		}
		if marker = page.NextMarker; marker == nil {
			break
		}
	}
	var rmarker *string
	for {
		page, err := t.IAM.ListRoles(ctx, &iam.ListRolesInput{PathPrefix: &t.RolePath, Marker: rmarker})
		if err != nil {
			return functions, roles, errors.Join(append(errs, fmt.Errorf("list roles: %w", err))...)
		}
		for _, r := range page.Roles {
			if aws.ToString(r.Path) != t.RolePath { // a deeper path is not the runner's
				continue
			}
			if err := t.deleteRole(ctx, aws.ToString(r.RoleName)); err != nil {
				errs = append(errs, err)
				continue
			}
			roles++
		}
		if !page.IsTruncated {
			break
		}
		rmarker = page.Marker
	}
	return functions, roles, errors.Join(errs...)
}

func (t *Teardown) deleteRole(ctx context.Context, name string) error {
	var none *iamtypes.NoSuchEntityException
	policies, err := t.IAM.ListRolePolicies(ctx, &iam.ListRolePoliciesInput{RoleName: &name})
	if errors.As(err, &none) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list the policies of role %s: %w", name, err)
	}
	for _, p := range policies.PolicyNames {
		if _, err := t.IAM.DeleteRolePolicy(ctx, &iam.DeleteRolePolicyInput{RoleName: &name, PolicyName: aws.String(p)}); err != nil && !errors.As(err, &none) {
			return fmt.Errorf("delete policy %s of role %s: %w", p, name, err)
		}
	}
	if _, err := t.IAM.DeleteRole(ctx, &iam.DeleteRoleInput{RoleName: &name}); err != nil && !errors.As(err, &none) {
		return fmt.Errorf("delete role %s: %w", name, err)
	}
	return nil
}

// Handle is the custom resource's handler. It always answers
// CloudFormation, before the invocation's end (Reserve): SUCCESS for
// Create and Update (nothing to make), and for a Delete that left nothing;
// FAILED, naming what is left, for a Delete that did not finish (the
// stack's deletion stops: running it again retries, docs/deploy.md). Its
// error is the one of answering CloudFormation, which Lambda then retries.
func (t *Teardown) Handle(ctx context.Context, ev cfn.Event) error {
	if ev.ResponseURL == "" {
		return errors.New("not a CloudFormation custom resource request (no ResponseURL)")
	}
	res := cfn.Response{Status: cfn.StatusSuccess, RequestID: ev.RequestID, LogicalResourceID: ev.LogicalResourceID,
		StackID: ev.StackID, PhysicalResourceID: ev.PhysicalResourceID}
	if res.PhysicalResourceID == "" {
		// One id for the resource's life: an Update answering another id
		// would make CloudFormation Delete the "old" one, deployed code
		// and all.
		res.PhysicalResourceID = t.Prefix + "teardown"
	}
	if ev.RequestType == cfn.RequestDelete {
		work := ctx
		if deadline, ok := ctx.Deadline(); ok {
			var cancel context.CancelFunc
			work, cancel = context.WithDeadline(ctx, deadline.Add(-Reserve))
			defer cancel()
		}
		fns, roles, err := t.safeDelete(work)
		t.logger().Info("teardown of deployed code", "functions", fns, "roles", roles, "err", err)
		if err != nil {
			res.Status = cfn.StatusFailed
			res.Reason = reason(fns, roles, err)
		}
	}
	return t.answer(ctx, ev.ResponseURL, res)
}

// safeDelete is Delete, a panic made an error (CloudFormation is answered
// all the same).
func (t *Teardown) safeDelete(ctx context.Context) (fns, roles int, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("teardown panicked: %v", p)
		}
	}()
	return t.Delete(ctx)
}

// reason is a FAILED answer's reason: CloudFormation shows it in the
// stack's events and keeps 4 KB of the answer in all.
func reason(fns, roles int, err error) string {
	msg := fmt.Sprintf("deployed code not fully deleted (%d functions and %d roles deleted): %v. "+
		"Delete the stack again to retry, or see docs/deploy.md (Tear down)", fns, roles, err)
	if len(msg) > 2000 {
		msg = msg[:2000] + "…"
	}
	return msg
}

// answer PUTs the response to CloudFormation's presigned URL, retrying a
// few times (it is all CloudFormation waits for).
func (t *Teardown) answer(ctx context.Context, url string, res cfn.Response) error {
	body, err := json.Marshal(res)
	if err != nil {
		return err
	}
	client := t.HTTP
	if client == nil {
		client = http.DefaultClient
	}
	var last error
	for attempt := 0; attempt < 4; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return errors.Join(last, ctx.Err())
			case <-time.After(time.Duration(attempt) * 500 * time.Millisecond):
			}
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		// The URL is presigned without a content type: none is sent.
		req.Header.Del("Content-Type")
		r, err := client.Do(req)
		if err != nil {
			last = err
			continue
		}
		b, _ := io.ReadAll(io.LimitReader(r.Body, 4096))
		r.Body.Close()
		if r.StatusCode == http.StatusOK {
			return nil
		}
		last = fmt.Errorf("CloudFormation's response URL answered %d: %s", r.StatusCode, b)
	}
	return last
}

func (t *Teardown) logger() *slog.Logger {
	if t.Log != nil {
		return t.Log
	}
	return slog.Default()
}
