# The two commands of README.md: `make run` and `make test`.
.PHONY: run aws-local test vet unit conformance conformance-aws conformance-aws-container cli-e2e deploy-e2e deploy-e2e-aws llm-e2e console-e2e console-vendor webchat-e2e webchat-e2e-aws webchat-e2e-aws-container conformance-aws-nlb webchat-e2e-aws-nlb webchat-vendor signin-e2e metrics-e2e health-e2e health-vendor backup-e2e build infra lambda cfn-lint capacity stream-image export-bench fill-bench transfer-aws transfer-console-e2e

# Where `make run` listens: loopback only unless told otherwise
# (make run ADDR=:8080 listens on every interface).
ADDR ?= 127.0.0.1:8080

run:
	go run ./functions/local --addr $(ADDR)

# The AWS build run whole on this machine, without an AWS account
# (docs/deploy.md): the Lambda functions of template.yaml behind its API
# Gateway routes, each AWS call checked against the function's role. State
# in ./.data-aws; the first account's token in ./.data-aws/admin-token.
aws-local:
	go run ./functions/aws-local --addr $(ADDR)

test: vet unit infra conformance conformance-aws conformance-aws-container cli-e2e deploy-e2e deploy-e2e-aws llm-e2e console-e2e webchat-e2e inbox-e2e signin-e2e webchat-e2e-aws webchat-e2e-aws-container metrics-e2e health-e2e assistant-e2e assistant-e2e-aws assistant-console-e2e backup-e2e transfer-aws conformance-aws-nlb signin-e2e-aws transfer-console-e2e inbox-e2e-aws webchat-e2e-aws-nlb

vet:
	go vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1)

unit:
	go test -timeout 30m ./...

conformance:
	bash scripts/conformance/run.sh

# The same suite against the AWS build (./functions/aws-local): the first
# start builds the Lambda functions (minutes on a cold build cache).
conformance-aws:
	PLATFORM_PKG=./functions/aws-local READY_TIMEOUT=600 bash scripts/conformance/run.sh

# The suite's tests whose end users listen on streams (the real
# @botpress/chat client) against the AWS build with the container stream
# tier: the streams through the load balancer's stand-in to two
# chatstream-service tasks (docs/deploy.md "Stream tiers"); run.sh fails
# unless ChatStreamUrl is the load balancer's. Persistence, which does not
# depend on the tier, is conformance-aws's.
conformance-aws-container:
	AWS_LOCAL_STREAM_TIER=container SKIP_PERSISTENCE=1 PLATFORM_PKG=./functions/aws-local READY_TIMEOUT=600 bash scripts/conformance/run.sh tests/chat-client.test.mjs

# `bp dev` of the official CLI (a bot, an integration) through the
# platform's own tunnel (about 15 s).
cli-e2e:
	bash scripts/cli-e2e/run.sh

# bp deploy of the official CLI (0.8.59) against a fresh local platform:
# deployed code answering through the runtime (scripts/deploy-e2e).
deploy-e2e:
	bash scripts/deploy-e2e/run.sh

# The same against the AWS build (./functions/aws-local): deployed code in
# Lambda functions made by the admin function, under its role.
deploy-e2e-aws:
	PLATFORM_PKG=./functions/aws-local READY_TIMEOUT=600 bash scripts/deploy-e2e/run.sh

# @botpress/cognitive 0.5.4 and @botpress/zai 2.6.21 against a fresh local
# platform whose LLM provider is a fake OpenAI-compatible endpoint on
# loopback (scripts/llm-e2e, docs/llm.md; about 5 s).
llm-e2e:
	bash scripts/llm-e2e/run.sh

# The web console in headless Chromium, then Firefox (system packages; fails
# without them) against a fresh local platform and a plain-JS SDK bot;
# screenshots in .build/console-e2e (scripts/console/e2e.sh, docs/console.md).
console-e2e:
	bash scripts/console/e2e.sh

# Copy the console's browser libraries from the pinned npm packages into
# shared/console/static/vendor (with SHA256SUMS).
console-vendor:
	bash scripts/console/vendor.sh

# The hosted webchat page (the official @botpress/webchat component) in
# headless Chromium, then Firefox, with a plain-JS SDK bot; screenshots in
# .build/webchat-e2e (scripts/webchat/e2e.sh, docs/webchat-api.md).
webchat-e2e:
	bash scripts/webchat/e2e.sh

# The same page against the AWS build (./functions/aws-local), where
# getBotWebchat serves it: the stack's ChatStreamUrl, on the Lambda stream
# tier (the stream function's URL) and on the container tier (the load
# balancer's stand-in before two tasks); the file's upload goes to the
# presigned URL's other origin (the page's CSP names it, the bucket's CORS
# rule answers the preflight). Chromium, then Firefox; screenshots in
# .build/webchat-e2e-aws-<tier>.
webchat-e2e-aws:
	AWS_LOCAL=1 AWS_LOCAL_STREAM_TIER=lambda bash scripts/webchat/e2e.sh

webchat-e2e-aws-container:
	AWS_LOCAL=1 AWS_LOCAL_STREAM_TIER=container bash scripts/webchat/e2e.sh

# The container tier behind a Network Load Balancer's stand-in: TCP passed
# through with proxy protocol v2, TLS ended by the tasks with a test
# certificate (docs/deploy.md "Choosing the load balancer").
conformance-aws-nlb:
	AWS_LOCAL_STREAM_TIER=container AWS_LOCAL_STREAM_LB=nlb SKIP_PERSISTENCE=1 PLATFORM_PKG=./functions/aws-local READY_TIMEOUT=900 bash scripts/conformance/run.sh tests/chat-client.test.mjs

# The webchat e2e (make webchat-e2e-aws-container's steps) behind the
# NLB's stand-in: the page over https from the tasks, which end TLS with
# aws-local's test certificate; Chromium trusts that certificate's key,
# Firefox the test CA in its profile (certutil); screenshots in
# .build/webchat-e2e-aws-container-nlb.
webchat-e2e-aws-nlb:
	AWS_LOCAL=1 AWS_LOCAL_STREAM_TIER=container AWS_LOCAL_STREAM_LB=nlb bash scripts/webchat/e2e.sh

# Copy @botpress/webchat and React from the pinned npm packages into
# shared/webchat/static/vendor (with SHA256SUMS).
webchat-vendor:
	bash scripts/webchat/vendor.sh

# The platform's /metrics scraped by a real Prometheus server (Debian's
# prometheus package, with promtool) on loopback while a workload runs,
# queried over its HTTP API (scripts/metrics-e2e, docs/metrics.md; ~15 s).
metrics-e2e:
	METRICS_E2E=1 go test -count=1 ./scripts/metrics-e2e/

# The console's health page (health.js, its charts by the vendored uPlot)
# in headless Chromium, then Firefox, against a fresh local platform with a
# workload (scripts/health/e2e.sh; screenshots in .build/health-e2e).
health-e2e:
	bash scripts/health/e2e.sh

# Copy uPlot from its pinned npm package into
# shared/console/static/vendor/uplot (with SHA256SUMS).
health-vendor:
	bash scripts/health/vendor.sh

build:
	go build ./...

# The capacity model (docs/data-model.md, "Heat"): a load's shape replayed
# through the embedded DynamoDB, which counts units per partition key; it
# prints the peak units per key, the ceiling, Lambda concurrency and the
# cost per million messages. make capacity ARGS="-rate 500 -bots 50".
capacity:
	go run ./scripts/capacity $(ARGS)

# The container stream tier's image (docs/deploy.md "Stream tiers"):
# functions/chatstream-service for linux/arm64 as an OCI image tarball,
# built without a Docker daemon (shared/streamimage); push it to ECR with
# crane or skopeo and name it in the stack's StreamImage parameter.
stream-image:
	go run ./scripts/stream-image -o .build/stream-image.tar

# Deployment (docs/deploy.md). The CDK app in infra/ is its own Go module:
# its tests (CDK assertions, agreement with template.yaml) run here, not in
# `go test ./...` of the root module.
# The jsii runtime warns that Node.js 20 is past its end of life (22 and 24
# are supported); the tests silence that warning.
# -count=1: the tests read ../template.yaml, outside their module, where the
# go test cache does not look: a cached pass would hide an edited template
# (infra's TestInfraTargetRerunsOnTemplateChange checks this).
infra:
	cd infra && go vet ./... && JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20 go test -count=1 ./...

# Optional, with cfn-lint installed: template.yaml (after the SAM transform,
# which cfn-lint runs offline; it finds circular dependencies) and, after
# `npx aws-cdk@2 synth` in infra/, the CDK template (W3005: the CDK adds
# DependsOn entries its references already imply).
cfn-lint:
	cfn-lint template.yaml
	@if [ -f infra/cdk.out/bot-platform.template.json ]; then cfn-lint --ignore-checks W3005 -- infra/cdk.out/bot-platform.template.json; fi

# Lambda binaries: linux/arm64 for provided.al2023, without the go1.x RPC
# shim (lambda.norpc), stripped. `make lambda` builds every function into
# .build/lambda/<function>/bootstrap, the CDK app's assets (cdk.json runs it);
# sam build runs build-<LogicalId> with ARTIFACTS_DIR set.
LAMBDA_FUNCTIONS := admin chat tables files scheduler upload-completion dispatcher sweeper teardown chatstream chatfanout
LAMBDA_BUILD = GOOS=linux GOARCH=arm64 CGO_ENABLED=0 go build -trimpath -tags lambda.norpc -ldflags "-s -w"

lambda:
	@for f in $(LAMBDA_FUNCTIONS); do echo "build $$f"; $(LAMBDA_BUILD) -o .build/lambda/$$f/bootstrap ./functions/$$f || exit 1; done

build-AdminFunction:
	$(LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/admin
build-ChatFunction:
	$(LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/chat
build-TablesFunction:
	$(LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/tables
build-FilesFunction:
	$(LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/files
build-SchedulerFunction:
	$(LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/scheduler
build-UploadCompletionFunction:
	$(LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/upload-completion
build-DispatcherFunction:
	$(LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/dispatcher
build-SweeperFunction:
	$(LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/sweeper
build-TeardownFunction:
	$(LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/teardown
build-ChatStreamFunction:
	$(LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/chatstream
build-ChatFanoutFunction:
	$(LAMBDA_BUILD) -o $(ARTIFACTS_DIR)/bootstrap ./functions/chatfanout

# The console's inbox (humans in the loop) in headless Chromium and Firefox:
# a waiting session appears live, assign, reply with text and an image,
# close (scripts/console/inbox-e2e.sh, docs/hitl.md).
.PHONY: inbox-e2e
inbox-e2e:
	bash scripts/console/inbox-e2e.sh

# The inbox in Chromium and Firefox against the AWS build (aws-local): the
# stream from the streaming function's URL (scripts/console/inbox-e2e.sh).
.PHONY: inbox-e2e-aws
inbox-e2e-aws:
	AWS_LOCAL=1 bash scripts/console/inbox-e2e.sh

# People's sign-in in Chromium and Firefox against a real OpenID provider
# (the zitadel/oidc example, built from its module) on loopback:
# single sign-on, sign-out, a replayed answer refused, password + TOTP
# (scripts/signin/e2e.sh, docs/signin.md).
signin-e2e:
	bash scripts/signin/e2e.sh

# The same in Chromium and Firefox against the AWS build
# (./functions/aws-local): single sign-on by the stack's parameters with the
# client secret in SSM, the callback ApiUrl/auth/oidc/callback answered by
# the admin function; screenshots in .build/signin-e2e-aws.
.PHONY: signin-e2e-aws
signin-e2e-aws:
	AWS_LOCAL=1 bash scripts/signin/e2e.sh

# The assistant bot the platform ships (docs/assistant.md): rebuild its
# bundle shared/assistant/bot.cjs (embedded in the binary) from
# shared/assistant/bot/ after changing it; TestBundleIsFresh and
# assistant-e2e fail on a stale one.
.PHONY: assistant-bundle assistant-e2e assistant-e2e-aws
assistant-bundle:
	cd scripts/assistant && npm ci --no-audit --no-fund --loglevel=error && node build.mjs

# The assistant end to end in headless Chromium: `assistant create` with a
# PDF, questions in its hosted webchat answered through a fake
# OpenAI-compatible provider on loopback, and without a model
# (scripts/assistant/e2e.sh; screenshots in .build/assistant-e2e).
assistant-e2e:
	bash scripts/assistant/e2e.sh

# The same questions through the official @botpress/chat against the AWS
# build (./functions/aws-local: the bot in a Lambda function, the PDF
# indexed by the upload-completion function, the provider as the stack's
# LlmUrl); scripts/assistant/chat.sh.
assistant-e2e-aws:
	AWS_LOCAL=1 bash scripts/assistant/chat.sh

# The console's assistant path in headless Chromium and Firefox: "New
# assistant" (name, instructions, documents indexed, a model of a fake
# OpenAI-compatible provider on loopback) to an answer in the emulator with
# its passages and LLM call; settings applied to the next message; a viewer;
# a platform without a model (scripts/console/assistant-e2e.sh, docs/console.md).
.PHONY: assistant-console-e2e
assistant-console-e2e:
	bash scripts/console/assistant-e2e.sh

# The console's Backups page (backups.js) in headless Chromium, then
# Firefox: back up now, the backup listed with its size, a restore staged
# and done at the next start (scripts/backup/e2e.sh; screenshots in
# .build/backup-e2e; docs/backup.md).
backup-e2e:
	bash scripts/backup/e2e.sh

# The console's export and import (transfer.js) in headless Chromium, then
# Firefox: a bot exported from one local platform and imported into another
# (scripts/transfer/e2e.sh; screenshots in .build/transfer-console-e2e;
# docs/export-import.md).
transfer-console-e2e:
	bash scripts/transfer/e2e.sh

# Fill time through the official client: 100,000 table rows of 3 indexed
# columns by 4 writers, then 20,000 messages into 100 conversations by 8
# (docs/tables.md, "Measured"). Not part of test: about a minute.
fill-bench:
	SKIP_PERSISTENCE=1 bash scripts/conformance/run.sh scripts/conformance/bench/fill.test.mjs

# Export of 1,000, 10,000 and 100,000 table rows by the real binary: peak
# RSS (flat) and throughput in rows/s and MB/s (docs/export-import.md).
# Not part of test: it seeds 111,000 rows (a few minutes on 2 cores).
export-bench:
	PLATFORM_EXPORT_BENCH=1 go test -run TestExportMemoryFlat -v -timeout 30m ./shared/transfer/

# The export/import round trip into the AWS build run whole on this
# machine (./functions/aws-local): docs/export-import.md.
transfer-aws:
	PLATFORM_TRANSFER_AWS=1 go test -run TestRoundTripAWSLocal -v -timeout 30m ./shared/transfer/
