package main

import (
	"context"
	"fmt"
	"os"

	"github.com/botforge/platform/shared/backup"
	"github.com/botforge/platform/shared/clientip"
	"github.com/botforge/platform/shared/command"
	"github.com/botforge/platform/shared/embeddings"
	"github.com/botforge/platform/shared/llm"
	"github.com/botforge/platform/shared/local"
	"github.com/botforge/platform/shared/metrics"
	"github.com/botforge/platform/shared/signin"
)

var serveCommand = command.Command{
	Name:    "serve",
	Summary: "run the platform on this machine (the default command)",
	Run:     serve,
}

func serve(ctx context.Context, env command.Env, args []string) error {
	fs := command.FlagSet(env, "[flags]")
	// Loopback only unless told otherwise: the first start prints the admin
	// token, and nothing else on the network should reach the platform.
	addr := fs.String("addr", local.DefaultAddr, "address to listen on (e.g. :8080 for every interface)")
	dataDir := fs.String("data-dir", "./.data", "directory holding the platform's state")
	reserve := fs.Int64("disk-reserve-mib", -1, "free space (MiB) below which writes are refused with 507 (0 keeps none; default: $"+local.DiskReserveEnv+" or 64)")
	// The LLM provider of the cognitive API: the flags stand for the
	// PLATFORM_LLM_* variables of the same meaning (docs/llm.md).
	llmURL := fs.String("llm-url", "", "OpenAI-compatible base URL ending in /v1 of the bots' LLM provider (PLATFORM_LLM_URL)")
	llmKey := fs.String("llm-api-key", "", "API key of that provider (PLATFORM_LLM_API_KEY); prefer the variable, a flag shows in ps")
	llmModels := fs.String("llm-models", "", `JSON of client model id -> upstream model id, e.g. {"best":"llama3.1:70b"} (PLATFORM_LLM_MODELS)`)
	llmTimeout := fs.String("llm-timeout", "", "timeout of each upstream attempt, e.g. 60s (PLATFORM_LLM_TIMEOUT)")
	// The embeddings model of knowledge bases' semantic search: the flags
	// stand for the PLATFORM_EMBEDDINGS_* variables (docs/files.md).
	embModel := fs.String("embeddings-model", "", "embeddings model id; set, searchFiles ranks by vector similarity too (PLATFORM_EMBEDDINGS_MODEL)")
	embURL := fs.String("embeddings-url", "", "OpenAI-compatible base URL ending in /v1 of the embeddings model; default the LLM provider's (PLATFORM_EMBEDDINGS_URL)")
	embKey := fs.String("embeddings-api-key", "", "API key of that endpoint (PLATFORM_EMBEDDINGS_API_KEY); prefer the variable, a flag shows in ps")
	trusted := fs.String("trusted-proxies", "", "comma-separated CIDRs of the proxies in front of the platform whose X-Forwarded-For is believed; none: the client's address is the socket's peer ("+clientip.EnvTrustedProxies+")")
	// People's sign-in (docs/signin.md).
	signinFlags := map[string]*string{
		signin.EnvPublicURL:          fs.String("public-url", "", "the console's public base URL; the OpenID callback is <public-url>/auth/oidc/callback ("+signin.EnvPublicURL+")"),
		signin.EnvOIDCIssuer:         fs.String("oidc-issuer", "", "OpenID Connect issuer URL of the single sign-on provider ("+signin.EnvOIDCIssuer+")"),
		signin.EnvOIDCClientID:       fs.String("oidc-client-id", "", "client id registered at that provider ("+signin.EnvOIDCClientID+")"),
		signin.EnvOIDCClientSecret:   fs.String("oidc-client-secret", "", "its client secret ("+signin.EnvOIDCClientSecret+"); prefer the variable, a flag shows in ps"),
		signin.EnvOIDCName:           fs.String("oidc-name", "", "the provider's display name on the sign-in page, \"Sign in with <name>\" ("+signin.EnvOIDCName+")"),
		signin.EnvOIDCAllowedDomains: fs.String("oidc-allowed-domains", "", "comma-separated email domains whose verified addresses get an account at their first single sign-on (self sign-up; default none: off) ("+signin.EnvOIDCAllowedDomains+")"),
		signin.EnvOIDCWorkspace:      fs.String("oidc-workspace", "", "the workspace (id or handle) that self-signed-up accounts join ("+signin.EnvOIDCWorkspace+")"),
		signin.EnvOIDCSignUpRole:     fs.String("oidc-signup-role", "", "their role there: viewer (default), billing, developer, manager or administrator ("+signin.EnvOIDCSignUpRole+")"),
		signin.EnvOIDCRoleClaim:      fs.String("oidc-role-claim", "", "a claim (e.g. groups) whose values set the role in --oidc-workspace at every single sign-on; default none: off ("+signin.EnvOIDCRoleClaim+")"),
		signin.EnvOIDCRoleMap:        fs.String("oidc-role-map", "", "its values' roles, e.g. bot-admins=administrator,bot-devs=developer; a sign-on mapping to none is refused ("+signin.EnvOIDCRoleMap+")"),
	}
	metricsToken := fs.String("metrics-token", "", "bearer token that /metrics requires (then from any address); none: loopback callers only ("+metrics.EnvToken+"); prefer the variable, a flag shows in ps")
	// Backups of the data directory (docs/backup.md).
	backupDir := fs.String("backup-dir", "", "directory of the data directory's backups (default: <data-dir>-backups; "+backup.EnvDir+")")
	backupEvery := fs.String("backup-every", "", "take a backup this often while serving, e.g. 6h or 30m; 0 or none: only on demand ("+backup.EnvEvery+")")
	backupKeep := fs.Int("backup-keep", -1, fmt.Sprintf("backups kept, the oldest pruned after each new one; 0 keeps all (default %d; %s)", backup.DefaultKeep, backup.EnvKeep))
	if err := command.Parse(fs, args, 0); err != nil {
		return err
	}
	every, keep, err := backup.ParseSchedule(*backupEvery, *backupKeep, os.Getenv)
	if err != nil {
		return command.Usagef("%v", err)
	}
	if *backupDir == "" {
		*backupDir = os.Getenv(backup.EnvDir)
	}
	for env, v := range signinFlags {
		if *v != "" {
			os.Setenv(env, *v)
		}
	}
	for env, v := range map[string]string{metrics.EnvToken: *metricsToken, clientip.EnvTrustedProxies: *trusted, llm.EnvURL: *llmURL, llm.EnvAPIKey: *llmKey, llm.EnvModels: *llmModels, llm.EnvTimeout: *llmTimeout,
		embeddings.EnvModel: *embModel, embeddings.EnvURL: *embURL, embeddings.EnvAPIKey: *embKey} {
		if v != "" {
			os.Setenv(env, v)
		}
	}
	o := local.Options{Addr: *addr, DataDir: *dataDir, Backup: local.BackupOptions{Dir: *backupDir, Every: every, Keep: keep}}
	if *reserve >= 0 {
		o.DiskReserveMiB = reserve
	}
	if err := local.Run(ctx, o); err != nil {
		return err
	}
	return nil
}
