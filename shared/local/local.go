// Package local runs the whole platform on one machine: all four API areas
// on one port, over embedded stand-ins for DynamoDB (durable minidyn) and S3
// (gofakes3 with SigV4 checks), unless environment variables point at real
// endpoints. The API code path is the production one: AWS SDK clients
// speaking the AWS wire protocols.
package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/botforge/platform/shared/backup"
	"github.com/botforge/platform/shared/builtin"
	"github.com/botforge/platform/shared/clientip"
	"github.com/botforge/platform/shared/delivery"
	"github.com/botforge/platform/shared/dispatch"
	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/files"
	"github.com/botforge/platform/shared/fsutil"
	"github.com/botforge/platform/shared/httpapi"
	"github.com/botforge/platform/shared/hubstd"
	"github.com/botforge/platform/shared/listen"
	"github.com/botforge/platform/shared/localdynamo"
	"github.com/botforge/platform/shared/locals3"
	"github.com/botforge/platform/shared/logstore"
	"github.com/botforge/platform/shared/metrics"
	"github.com/botforge/platform/shared/platform"
	"github.com/botforge/platform/shared/runtime"
	"github.com/botforge/platform/shared/s3store"
	"github.com/botforge/platform/shared/scheduler"
	"github.com/botforge/platform/shared/signin"
	"github.com/botforge/platform/shared/tablemigrate"
	"github.com/botforge/platform/shared/tracing"
	"github.com/botforge/platform/shared/transfer"
	"github.com/botforge/platform/shared/tunnel"
	"github.com/botforge/platform/shared/worker"
)

// DefaultAddr is where the local platform listens unless told otherwise:
// loopback only.
const DefaultAddr = "127.0.0.1:8080"

// Options configure the local platform.
type Options struct {
	Addr    string // listen address (default DefaultAddr), e.g. ":8080" for every interface
	DataDir string // where every piece of state lives
	Logger  *slog.Logger
	// Limits bound slow and idle connections (zero fields: DefaultLimits).
	Limits Limits
	// Ready, when set, is called once the server listens, with its address.
	Ready func(addr string)
	// DiskReserveMiB, when set, is the free space (MiB) below which the
	// embedded DynamoDB refuses writes (0 keeps none); unset, it is
	// PLATFORM_LOCAL_DISK_RESERVE_MIB or 64 (the -disk-reserve-mib flag).
	DiskReserveMiB *int64
	// Backup configures the data directory's backups (shared/backup,
	// docs/backup.md): where they go, how often, how many are kept.
	Backup BackupOptions
}

// BackupOptions configure the backups of the data directory.
type BackupOptions struct {
	Dir   string        // default: <data-dir>-backups beside the data directory
	Every time.Duration // 0: none on a schedule
	Keep  int           // 0: all kept
}

// DiskReserveEnv names the variable setting the disk reserve in MiB.
const DiskReserveEnv = "PLATFORM_LOCAL_DISK_RESERVE_MIB"

// reserveHint ends the disk-full refusal's message (507 answers and a
// refused start alike): how to change the reserve.
const reserveHint = "free some space, or change the reserve with the -disk-reserve-mib flag or the " + DiskReserveEnv + " environment variable (in MiB; 0 keeps none)"

// diskReserve is the reserve in bytes: o's, else the variable's, else the
// store's default.
func diskReserve(mib *int64) (int64, error) {
	if mib == nil {
		v := os.Getenv(DiskReserveEnv)
		if v == "" {
			return localdynamo.DefaultMinFreeBytes, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n > 1<<40 {
			return 0, fmt.Errorf("%s=%q: want a whole number of MiB, 0 or more", DiskReserveEnv, v)
		}
		mib = &n
	}
	if *mib < 0 || *mib > 1<<40 {
		return 0, fmt.Errorf("disk reserve %d MiB: want a whole number of MiB, 0 or more", *mib)
	}
	if *mib == 0 {
		return -1, nil // localdynamo: a negative reserve keeps none
	}
	return *mib << 20, nil
}

// AdminEmail is the email of the first account of a fresh local platform.
const AdminEmail = "admin@localhost"

// S3Prefix is the path under which the embedded S3 is served; presigned
// upload URLs point there.
const S3Prefix = "/_s3"

// secrets are generated at first start and kept in the data directory.
type secrets struct {
	PagingKey   string `json:"pagingKey"`
	S3AccessKey string `json:"s3AccessKey"`
	S3SecretKey string `json:"s3SecretKey"`
}

// Platform is a running local platform.
type Platform struct {
	Handler http.Handler // the API and the embedded S3
	Store   *dynamo.Store
	Env     runtime.Env
	// Dispatcher delivers the runtime's outbox (docs/runtime.md).
	Dispatcher *dispatch.Dispatcher
	// Dynamo is the embedded DynamoDB (nil with DYNAMODB_ENDPOINT set).
	Dynamo *localdynamo.Server
	// S3 is the embedded S3 (nil with an external one).
	S3 *locals3.Server
	// FirstToken is the first account's token when this start created it.
	FirstToken string
	// SetupURL is the first account's one-time setup link (set a password
	// or link single sign-on) when this start created it; it is written
	// to <data-dir>/setup-link too (shared/signin).
	SetupURL string
	closers  []func() error
	onUsage  atomic.Pointer[func(op string, u *dynamo.Usage)]
	// Scheduler runs bots' recurring events in-process (schedules kept in
	// <data-dir>/schedules.json).
	Scheduler  *scheduler.Local
	onDelivery atomic.Pointer[delivery.Observer]
	// Logs is the embedded store of bot and integration logs
	// (<data-dir>/logs; nil with LOGS_ENDPOINT set); logDelivery writes
	// every delivery to the logs and records failed deliveries to bots as
	// bot issues.
	Logs        *logstore.Local
	logDelivery delivery.Observer
	// Sweeper finishes pending deletions in the background (dynamo.Sweeper).
	Sweeper *dynamo.Sweeper
	// Tunnels serves the tunnel protocol of `bp dev --tunnelUrl <platform
	// url>` (shared/tunnel, docs/runtime.md).
	Tunnels *tunnel.Server
	// Workers run deployed code: one Node.js process per bot and per
	// integration version with code and no url (<data-dir>/workers).
	Workers *worker.Manager
	// Builtins are the integrations served in-process, published in the
	// hub at start (shared/builtin).
	Builtins *builtin.Registry
	// Files is the file storage (file contents, deployed code).
	Files platform.FileStorage
	// Series keeps the metrics over the last hour and day (the console's
	// health page).
	Series *metrics.Series
	// Backups takes the data directory's backups (nil with external
	// stores); Run sets its directory, schedule and retention.
	Backups *backup.Manager
	apiURL  atomic.Pointer[string]
}

// SetBaseURL sets where deployed code reaches the API (BP_API_URL), when
// Open did not know it (tests serving the handler on a port of their own).
func (p *Platform) SetBaseURL(u string) { p.apiURL.Store(&u) }

// OnDelivery sets a function receiving the result of every delivery of a
// recurring event and every call made to an integration (logs, bot issues
// and tests hook here).
func (p *Platform) OnDelivery(f delivery.Observer) { p.onDelivery.Store(&f) }

func (p *Platform) observeDelivery(ctx context.Context, r delivery.Result) {
	if p.logDelivery != nil {
		p.logDelivery(ctx, r)
	}
	if f := p.onDelivery.Load(); f != nil && *f != nil {
		(*f)(ctx, r)
	}
}

// OnUsage sets a function receiving the DynamoDB usage of every API call
// (tests and benchmarks count calls per operation with it).
func (p *Platform) OnUsage(f func(op string, u *dynamo.Usage)) { p.onUsage.Store(&f) }

// Open starts the stand-ins, creates the table and bucket when missing and
// the first account on first start, and returns the platform's handler.
// baseURL is where clients reach the server (used in presigned URLs).
// The disk reserve is PLATFORM_LOCAL_DISK_RESERVE_MIB's, or 64 MiB.
func Open(ctx context.Context, dataDir, baseURL string, log *slog.Logger) (*Platform, error) {
	return open(ctx, dataDir, baseURL, log, nil, false)
}

// OpenAWSDispatch is Open with the outbox delivered as the AWS build
// delivers it, for the capacity model's AWS replay (shared/capacity): the
// store keeps every entry in the sweep index (no SparseSweep), and the
// Dispatcher is built as the dispatcher function builds its own (not
// Exclusive: a lease per delivery) and is not started: the caller drives
// it (runtime.DrainOutbox, fed the table's changes as the stream's event
// source mapping would be).
func OpenAWSDispatch(ctx context.Context, dataDir, baseURL string, log *slog.Logger) (*Platform, error) {
	return open(ctx, dataDir, baseURL, log, nil, true)
}

func open(ctx context.Context, dataDir, baseURL string, log *slog.Logger, reserveMiB *int64, awsDispatch bool) (*Platform, error) {
	reserve, err := diskReserve(reserveMiB)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	// Each line of a request, and of the delivery it queued, carries
	// its trace id (shared/tracing).
	log = slog.New(tracing.LogHandler(log.Handler()))
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, err
	}
	sec, err := loadSecrets(dataDir)
	if err != nil {
		return nil, err
	}
	env := runtime.FromEnv()
	p := &Platform{Env: env}
	metrics.ColdStarts.Inc("local") // this process's start (on AWS, each function's)
	ok := false
	defer func() {
		if !ok {
			p.Close()
		}
	}()

	cfg, err := runtime.AWSConfig(ctx)
	if err != nil {
		return nil, err
	}
	var ddbHandler http.Handler
	if env.DynamoEndpoint == "" {
		d, err := localdynamo.OpenWith(filepath.Join(dataDir, "dynamodb"), localdynamo.Options{MinFreeBytes: reserve, ReserveHint: reserveHint, Logger: log})
		if err != nil {
			return nil, fmt.Errorf("embedded DynamoDB: %w", err)
		}
		p.closers = append(p.closers, d.Close)
		p.Dynamo, ddbHandler = d, d
	}
	db := runtime.DynamoClient(cfg, env, ddbHandler)
	if err := dynamo.EnsureTable(ctx, db, env.Table); err != nil {
		return nil, err
	}
	limits, err := env.Limits() // the operator's quotas (docs/account.md)
	if err != nil {
		return nil, err
	}
	// The proxies whose X-Forwarded-For is believed (--trusted-proxies);
	// none: the client is the socket's peer.
	trusted, err := clientip.Parse(env.TrustedProxies)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", clientip.EnvTrustedProxies, err)
	}
	p.Store = dynamo.New(db, env.Table)
	if awsDispatch { // the AWS build's store, as its Lambda functions build it
		if p.Store, err = runtime.NewStore(db, env); err != nil {
			return nil, err
		}
	}
	p.Store.SetLimits(limits)
	// The store's item calls skip the SDK client's operation stack, run on the
	// embedded DynamoDB directly (dynamo.Store.RunDirect), unless
	// PLATFORM_LOCAL_DYNAMO_HTTP asks for the HTTP path.
	if p.Dynamo != nil && os.Getenv(runtime.EnvLocalDynamoHTTP) == "" {
		p.Store.RunDirect(p.Dynamo)
	}
	gw, err := runtime.LLM(ctx, false) // PLATFORM_LLM_* (docs/llm.md)
	if err != nil {
		return nil, err
	}
	semantic, err := runtime.Semantic(ctx, false, p.Store) // PLATFORM_EMBEDDINGS_* (docs/files.md)
	if err != nil {
		return nil, err
	}

	// The embedded S3 at S3Prefix, the API everywhere else. No ServeMux
	// here: it would answer a path with "." or ".." segments with a
	// redirect (HTML), where the API answers in its error shape.
	var s3Handler http.Handler
	// File contents: every completed PUT (or copy) runs the upload
	// completion of the S3 event in AWS.
	completer := &files.Completer{Records: p.Store, Log: log, Semantic: semantic}
	var fileStore platform.FileStorage
	if env.S3Endpoint == "" {
		s3, err := locals3.Open(locals3.Options{
			Dir: filepath.Join(dataDir, "s3"), Region: "us-east-1",
			AccessKeyID: sec.S3AccessKey, SecretAccessKey: sec.S3SecretKey,
			PathPrefix:   S3Prefix,
			MinFreeBytes: reserve, ReserveHint: reserveHint,
			OnPut: func(ctx context.Context, obj locals3.PutObject) error {
				if obj.Bucket != env.Bucket || strings.HasPrefix(obj.Key, httpapi.CodeKeyPrefix) {
					return nil // deployed code is no upload to complete
				}
				return completer.ObjectCreated(context.WithoutCancel(ctx), obj.Key)
			},
		})
		if err != nil {
			return nil, fmt.Errorf("embedded S3: %w", err)
		}
		p.closers = append(p.closers, s3.Close)
		p.S3 = s3
		if err := s3.EnsureBucket(ctx, env.Bucket); err != nil {
			return nil, err
		}
		s3Handler = s3
		fileStore = embeddedFileStore(cfg, s3, env.Bucket, sec, baseURL)
	} else {
		// An external S3 (MinIO, moto): create the bucket when missing;
		// it calls no hook of this process, so uploads are watched and
		// completed from here (and on getFile).
		ext := s3store.New(runtime.S3Client(cfg, env), env.Bucket, s3store.Options{})
		if err := ext.EnsureBucket(ctx, cfg.Region); err != nil {
			return nil, err
		}
		w := &files.UploadWatcher{FileStorage: ext, Complete: completer.ObjectCreated, Log: log}
		p.closers = append(p.closers, w.Close)
		fileStore = w
	}
	completer.Objects = fileStore
	p.Files = fileStore

	// Bot and integration logs: the embedded store (or CloudWatch Logs at
	// LOGS_ENDPOINT); deliveries are logged and failed deliveries to bots
	// recorded as bot issues.
	var logs platform.LogStore
	if env.LogsEndpoint == "" {
		l, err := logstore.OpenLocal(filepath.Join(dataDir, "logs"), logstore.LocalOptions{Logger: log})
		if err != nil {
			return nil, fmt.Errorf("embedded log store: %w", err)
		}
		p.closers = append(p.closers, l.Close)
		p.Logs, logs = l, l
	} else {
		logs = runtime.Logs(cfg, env)
	}
	p.logDelivery = logstore.Observer(logs, p.Store, log)

	// Recurring events: an in-process scheduler firing the scheduler
	// function's code. Locally, bots and integrations may live on this
	// machine, so deliveries may reach private addresses.
	outbound := delivery.Client(true)
	// Deployed code runs in Node.js workers on this machine, calling the
	// API at baseURL (a wildcard address is reached on loopback).
	if u, err := url.Parse(baseURL); err == nil {
		if ip := net.ParseIP(u.Hostname()); ip != nil && ip.IsUnspecified() {
			u.Host = net.JoinHostPort("127.0.0.1", u.Port())
			baseURL = u.String()
		}
	}
	p.SetBaseURL(baseURL)
	workDir := filepath.Join(dataDir, "workers")
	_ = os.RemoveAll(workDir) // a killed platform's workers' files
	p.Workers = &worker.Manager{
		Dir: workDir, Source: worker.StoreSource{Store: p.Store, Files: fileStore}, Logs: logs, Log: log,
		APIURL: func() string { return *p.apiURL.Load() },
	}
	p.closers = append(p.closers, p.Workers.Close)
	if err := p.Workers.NodeAvailable(); err != nil {
		log.Warn("bots and integrations deployed with code (and no url) will not run", "reason", err.Error())
	}
	recurring := &delivery.Recurring{Bots: p.Store, Client: outbound, Log: log, Observer: p.observeDelivery, Code: p.Workers}
	if ev, ok := any(p.Store).(delivery.EventRecorder); ok {
		recurring.Events = ev
	}
	// The embedded DynamoDB deletes no expired item: each firing deletes
	// its bot's oldest expired events (a few more than it creates).
	recurring.PruneEvents = func(ctx context.Context, botID string) error {
		_, err := p.Store.DeleteExpiredEvents(ctx, botID, 4)
		return err
	}
	// Test suites watching firings set PLATFORM_LOCAL_SUBMINUTE_SCHEDULES=1
	// to let schedules fire every second; otherwise at most once a minute.
	var schedOpts []scheduler.LocalOption
	if os.Getenv("PLATFORM_LOCAL_SUBMINUTE_SCHEDULES") == "1" {
		schedOpts = append(schedOpts, scheduler.WithSubMinute())
	}
	sched, err := scheduler.OpenLocal(filepath.Join(dataDir, "schedules.json"), recurring.Handle, log, 3*time.Minute, schedOpts...)
	if err != nil {
		return nil, fmt.Errorf("local scheduler: %w", err)
	}
	recurring.Scheduler, p.Scheduler = sched, sched
	p.closers = append(p.closers, sched.Close)

	key, _ := hex.DecodeString(sec.PagingKey)
	if env.PagingKey != "" {
		if key, err = env.PagingKeyBytes(); err != nil {
			return nil, err
		}
	}
	// Deletions left pending (a deleted bot's data, a deletion a crash
	// interrupted) are finished in the background: at once on start, when
	// the API kicks the sweeper, and every minute.
	sweeper := &dynamo.Sweeper{Store: p.Store, Objects: fileStore, Log: log}
	sweepCtx, stopSweep := context.WithCancel(context.WithoutCancel(ctx))
	swept := make(chan struct{})
	go func() { defer close(swept); sweeper.Loop(sweepCtx, time.Minute) }()
	p.closers = append(p.closers, func() error { stopSweep(); <-swept; return nil })
	p.Sweeper = sweeper

	// Tables written before the column index existed get it in the
	// background (tablemigrate): at once, then every minute until none
	// is left; their finds read the table until then.
	migrator := &tablemigrate.Migrator{Store: p.Store, Log: log}
	migrateCtx, stopMigrate := context.WithCancel(context.WithoutCancel(ctx))
	migrated := make(chan struct{})
	go func() { defer close(migrated); migrator.Loop(migrateCtx, time.Minute) }()
	p.closers = append(p.closers, func() error { stopMigrate(); <-migrated; return nil })

	p.Builtins = runtime.BuiltinsWith(listen.NewHub(), gw, p.Store, p.Store.Limiter())
	// The metrics over the last hour and day for the console's health
	// page (docs/metrics.md), sampled every PLATFORM_METRICS_STEP_SECONDS
	// (default 10).
	series := &metrics.Series{}
	p.Series = series
	if v, err := strconv.Atoi(os.Getenv("PLATFORM_METRICS_STEP_SECONDS")); err == nil && v > 0 {
		series.Step = time.Duration(v) * time.Second
	}
	seriesCtx, stopSeries := context.WithCancel(context.WithoutCancel(ctx))
	go series.Run(seriesCtx)
	p.closers = append(p.closers, func() error { stopSeries(); return nil })
	// Backups of the data directory (docs/backup.md): the embedded stores
	// only; with external ones their own tools back them up.
	var backups platform.Backups
	if p.Dynamo != nil && p.S3 != nil {
		p.Backups = &backup.Manager{Stores: backup.Stores{Dynamo: p.Dynamo, S3: p.S3}, DataDir: dataDir, Dir: DefaultBackupDir(dataDir), OperatorEmail: AdminEmail,
			OnError: func(err error) { log.Error("scheduled backup failed", "err", err) }}
		backups = p.Backups
	}
	signinCfg, err := signin.FromEnv(os.Getenv) // docs/signin.md
	if err != nil {
		return nil, err
	}
	api := httpapi.New(httpapi.Config{
		SignIn:        signinCfg,
		ChatStreamURL: env.ChatStreamURL,
		Builtins:      p.Builtins,
		ClientIP:      trusted,
		Series:        series,
		Backups:       backups,
		Transfers:     &transfer.Jobs{Dir: filepath.Join(dataDir, "transfers"), APIURL: func() string { return *p.apiURL.Load() }}, // the console's export/import
		Sweeper:       sweeper,
		Store:         p.Store,
		PagingKey:     key,
		Invite:        func(ctx context.Context, email, token string) error { return writeAccountToken(dataDir, email, token) },
		Logger:        log,
		OnUsage: func(op string, u *dynamo.Usage) {
			if f := p.onUsage.Load(); f != nil {
				(*f)(op, u)
			}
		},
		Scheduler:  sched,
		Logs:       logs,
		Outbound:   outbound,
		OnDelivery: p.observeDelivery,
		Code:       p.Workers,
		LLM:        gw,
		Semantic:   semantic,
		Files:      fileStore,
		TableFiles: &files.TableFiles{Store: p.Store, Objects: fileStore, Log: log},
		// The local process outlives its requests: large table duplicates
		// finish in the background.
		BackgroundJobs: true,
		// An external S3 notifies no one: getFile completes uploads too.
		CompleteOnRead: env.S3Endpoint != "",
	}, httpapi.AllAreas...)
	// Browser pages of this machine may call the API (and upload to the
	// embedded S3) unless PLATFORM_CORS_ORIGINS says otherwise.
	originList := env.CORSOrigins
	if originList == "" {
		originList = httpapi.LocalOrigins
	}
	origins, err := httpapi.ParseOrigins(originList)
	if err != nil {
		return nil, fmt.Errorf("PLATFORM_CORS_ORIGINS: %w", err)
	}
	// `bp dev --tunnelUrl <this server>`: a WebSocket on /<tunnelId> (the
	// CLI) and requests to /<tunnelId>/... relayed to it; the API's own
	// first path segments are never tunnel ids.
	p.Tunnels = tunnel.New(tunnel.Options{Reserved: []string{"v1", "v2", "webhooks", "console", strings.TrimPrefix(S3Prefix, "/"), strings.TrimPrefix(metrics.Path, "/")}, Logger: log})
	p.closers = append(p.closers, p.Tunnels.Close)
	// The platform's metrics in the Prometheus format (docs/metrics.md):
	// to loopback callers, or to the bearer of PLATFORM_METRICS_TOKEN.
	metricsToken := os.Getenv(metrics.EnvToken)
	metricsHandler := metrics.Handler()
	p.Handler = httpapi.RequestLog(log, httpapi.CORS(origins, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == metrics.Path {
			if err := metrics.Allowed(r, metricsToken); err != nil {
				httpapi.WriteError(w, r, err)
				return
			}
			metricsHandler.ServeHTTP(w, r)
			return
		}
		if p.Tunnels.Claims(r) {
			p.Tunnels.ServeHTTP(w, r)
			return
		}
		if s3Handler != nil && isS3Path(r.URL.EscapedPath()) {
			httpapi.SetCaller(r.Context(), "s3")
			s3Handler.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	})))

	if err := bootstrap(ctx, p.Store, dataDir, log, &p.FirstToken); err != nil {
		return nil, err
	}
	if p.FirstToken != "" {
		if p.SetupURL, err = setupLink(ctx, p.Store, signinCfg, dataDir, baseURL); err != nil {
			return nil, err
		}
	}
	// The hub's standard interfaces (llm, hitl, ...), then the built-in
	// integrations, some of which implement them.
	if err := hubstd.Publish(ctx, p.Store); err != nil {
		log.Error("publishing the standard interfaces", "err", err)
	}
	if err := p.Builtins.Publish(ctx, p.Store); err != nil {
		// A name another workspace took first: the others are published.
		log.Error("publishing the built-in integrations", "err", err)
	}

	// The runtime: the dispatcher delivers the outbox (events to bots, the
	// bots' messages to integrations), woken by each commit that queued a
	// delivery, and every second for retries and scheduled events; what
	// was pending before a crash goes out now.
	p.Dispatcher = &dispatch.Dispatcher{Store: p.Store, Client: outbound, Log: log, Observer: p.observeDelivery, Code: p.Workers,
		Builtins: p.Builtins, WebhookBase: strings.TrimSuffix(baseURL, "/") + "/webhooks",
		// Over the embedded DynamoDB this process alone delivers (no lease
		// per delivery: dispatch.Dispatcher.Exclusive).
		Exclusive: p.Dynamo != nil && !awsDispatch}
	if p.Dynamo != nil && !awsDispatch {
		// The sweep index is sparse here: an entry due at once is found by
		// its commit's wake-up (OnOutbox below), and, after a crash, by
		// listing the store's outbox partitions at start (2 index write
		// units fewer per delivery; docs/runtime.md, "The sparse sweep
		// index").
		ddb, table := p.Dynamo, env.Table
		p.Store.SparseSweep(func(prefix string) ([]string, error) { return ddb.PartitionKeys(table, prefix) })
		p.Dispatcher.AllShards = p.Store.OutboxShards
	}
	// A data directory written before the outbox was sharded: its entries
	// move into their shards (idempotent, each in one transaction).
	if n, err := p.Store.MigrateOutbox(ctx); err != nil {
		return nil, fmt.Errorf("runtime: migrating the outbox: %w", err)
	} else if n > 0 {
		log.Info("runtime: outbox entries moved into the sharded layout", "count", n)
	}
	// This process alone holds the data directory: a lease found now is a
	// dead process's, and would hold its delivery back for minutes.
	if n, err := p.Store.ReleaseLeases(ctx); err != nil {
		return nil, fmt.Errorf("runtime: %w", err)
	} else if n > 0 {
		log.Info("runtime: deliveries interrupted by the last stop will be made again", "count", n)
	}
	if awsDispatch {
		ok = true
		return p, nil
	}
	p.Store.OnOutbox(p.Dispatcher.WakeShards)
	dctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Dispatcher.Run(dctx, time.Second)
	}()
	// First to run at Close: no delivery is under way when the stand-ins stop.
	p.closers = append(p.closers, func() error { stop(); <-done; return nil })
	ok = true
	return p, nil
}

// isS3Path tells whether a request is for the embedded S3: a canonical
// path at S3Prefix (object keys of files are canonical paths; anything else
// goes to the API, which refuses it in its error shape).
func isS3Path(p string) bool {
	return (p == S3Prefix || strings.HasPrefix(p, S3Prefix+"/")) && httpapi.CanonicalPath(p)
}

// Close stops the stand-ins, flushing what they hold.
func (p *Platform) Close() error {
	var errs []error
	for i := len(p.closers) - 1; i >= 0; i-- {
		errs = append(errs, p.closers[i]())
	}
	p.closers = nil
	return errors.Join(errs...)
}

// Run serves the platform until ctx is done, then shuts down cleanly.
func Run(ctx context.Context, o Options) error {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	if o.Addr == "" {
		o.Addr = DefaultAddr
	}
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return err
	}
	base := "http://" + ln.Addr().String()
	if strings.HasPrefix(o.Addr, ":") {
		base = "http://localhost" + o.Addr
	}
	// A restore staged while the platform ran (the console's restore
	// button) happens now, before the stores open (docs/backup.md).
	if restored, aside, err := backup.ApplyPending(o.DataDir); err != nil {
		ln.Close()
		return err
	} else if restored != "" {
		log.Info("restored the staged backup", "backup", restored, "replacedStateKeptIn", aside)
	}
	p, err := open(ctx, o.DataDir, base, log, o.DiskReserveMiB, false)
	if err != nil {
		ln.Close()
		return err
	}
	defer p.Close()
	if p.Backups != nil {
		if o.Backup.Dir != "" {
			p.Backups.Dir = o.Backup.Dir
		}
		p.Backups.Every, p.Backups.Keep = o.Backup.Every, o.Backup.Keep
		bctx, stopBackups := context.WithCancel(ctx)
		backupsDone := make(chan struct{})
		go func() { defer close(backupsDone); p.Backups.Run(bctx) }()
		defer func() { stopBackups(); <-backupsDone }()
	}
	if p.FirstToken != "" {
		fmt.Fprintf(os.Stderr, "\nFirst account %s created. Its personal access token (also in %s):\n\n    %s\n\n",
			AdminEmail, filepath.Join(o.DataDir, "admin-token"), p.FirstToken)
		if p.SetupURL != "" {
			fmt.Fprintf(os.Stderr, "Set its password (or link single sign-on) once, at this link (also in %s):\n\n    %s\n\n",
				filepath.Join(o.DataDir, "setup-link"), p.SetupURL)
		}
	}
	limits := o.Limits.withDefaults()
	srv := &http.Server{Handler: guard(limits, p.Handler), ReadHeaderTimeout: limits.ReadHeaderTimeout, IdleTimeout: limits.IdleTimeout}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("platform listening", "addr", ln.Addr().String(), "dataDir", o.DataDir)
	if o.Ready != nil {
		o.Ready(ln.Addr().String())
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}

// DefaultBackupDir is where backups go unless told otherwise: beside the
// data directory (the same file system, so unchanged files are hard links).
func DefaultBackupDir(dataDir string) string {
	return filepath.Clean(dataDir) + "-backups"
}

func loadSecrets(dir string) (secrets, error) {
	path := filepath.Join(dir, "secrets.json")
	var s secrets
	b, err := os.ReadFile(path)
	if err == nil {
		if err := json.Unmarshal(b, &s); err != nil {
			return s, fmt.Errorf("%s: %w", path, err)
		}
		return s, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return s, err
	}
	s = secrets{PagingKey: randomHex(32), S3AccessKey: "LOCAL" + strings.ToUpper(randomHex(8)), S3SecretKey: randomHex(20)}
	b, _ = json.MarshalIndent(s, "", "  ")
	return s, fsutil.WriteFileAtomic(path, b)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// bootstrap creates the first account and its token on first start, and
// writes the token to <dataDir>/admin-token. It is idempotent: a crash
// before the file is written makes the next start issue a new token.
func bootstrap(ctx context.Context, store *dynamo.Store, dataDir string, log *slog.Logger, first *string) error {
	path := filepath.Join(dataDir, "admin-token")
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	acct, _, err := store.EnsureAccount(ctx, AdminEmail)
	if err != nil {
		return err
	}
	t, err := store.CreatePAT(ctx, acct.ID, "local admin")
	if err != nil {
		return err
	}
	if err := fsutil.WriteFileAtomic(path, []byte(t.Value)); err != nil {
		return err
	}
	log.Info("created the first account", "email", AdminEmail, "tokenFile", path)
	*first = t.Value
	return nil
}

// setupLink creates the first account's one-time setup link and writes
// it to <dataDir>/setup-link.
func setupLink(ctx context.Context, store *dynamo.Store, cfg signin.Config, dataDir, baseURL string) (string, error) {
	acct, ok, err := store.AccountByEmail(ctx, AdminEmail)
	if err != nil || !ok {
		return "", err
	}
	u, err := signin.New(cfg, store, nil, nil, nil).NewSetupLink(ctx, baseURL, acct)
	if err != nil {
		return "", err
	}
	return u, fsutil.WriteFileAtomic(filepath.Join(dataDir, "setup-link"), []byte(u))
}

// writeAccountToken is where a local invitation goes: the invited account's
// first token, in <dataDir>/account-tokens/<email>.
func writeAccountToken(dataDir, email, token string) error {
	email = dynamo.NormalizeEmail(email)
	if strings.ContainsAny(email, `/\`) || strings.HasPrefix(email, ".") {
		return platform.Invalid("email %q cannot name a token file", email)
	}
	dir := filepath.Join(dataDir, "account-tokens")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(filepath.Join(dir, email), []byte(token))
}

// embeddedFileStore is the file storage over the embedded S3: the SDK client
// reaches it in-process (bodies streamed), and presigned upload URLs point
// at S3Prefix on the address clients use (baseURL, or the address of the
// call when baseURL is empty, as in tests).
func embeddedFileStore(cfg aws.Config, h http.Handler, bucket string, sec secrets, baseURL string) platform.FileStorage {
	client := awss3.NewFromConfig(cfg, func(o *awss3.Options) {
		o.BaseEndpoint = aws.String("http://s3.local" + S3Prefix)
		o.UsePathStyle = true
		o.HTTPClient = s3store.HandlerClient(h)
		o.Credentials = credentials.NewStaticCredentialsProvider(sec.S3AccessKey, sec.S3SecretKey, "")
		o.Region = "us-east-1"
	})
	// A base URL on a wildcard address (--addr 0.0.0.0:8080) is no address
	// a client can use: then the call's address is.
	if u, err := url.Parse(baseURL); err == nil {
		if ip := net.ParseIP(u.Hostname()); ip != nil && ip.IsUnspecified() {
			baseURL = ""
		}
	}
	return s3store.New(client, bucket, s3store.Options{PresignEndpoint: func(ctx context.Context) string {
		if baseURL != "" {
			return strings.TrimRight(baseURL, "/") + S3Prefix
		}
		if o := platform.OriginFrom(ctx); o != "" {
			return o + S3Prefix
		}
		return ""
	}})
}
