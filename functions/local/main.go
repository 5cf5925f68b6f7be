// Command local runs the whole platform on this machine: all four API areas
// on one port, with embedded DynamoDB and S3 stand-ins keeping their state in
// --data-dir. Ctrl-C shuts it down cleanly.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/botforge/platform/shared/clientip"
	"github.com/botforge/platform/shared/embeddings"
	"github.com/botforge/platform/shared/llm"
	"github.com/botforge/platform/shared/local"
	"github.com/botforge/platform/shared/metrics"
	"github.com/botforge/platform/shared/signin"
)

func main() {
	// Loopback only unless told otherwise: the first start prints the admin
	// token, and nothing else on the network should reach the platform.
	addr := flag.String("addr", local.DefaultAddr, "address to listen on (e.g. :8080 for every interface)")
	dataDir := flag.String("data-dir", "./.data", "directory holding the platform's state")
	reserve := flag.Int64("disk-reserve-mib", -1, "free space (MiB) below which writes are refused with 507 (0 keeps none; default: $"+local.DiskReserveEnv+" or 64)")
	// The LLM provider of the cognitive API: the flags stand for the
	// PLATFORM_LLM_* variables of the same meaning (docs/llm.md).
	llmURL := flag.String("llm-url", "", "OpenAI-compatible base URL ending in /v1 of the bots' LLM provider (PLATFORM_LLM_URL)")
	llmKey := flag.String("llm-api-key", "", "API key of that provider (PLATFORM_LLM_API_KEY); prefer the variable, a flag shows in ps")
	llmModels := flag.String("llm-models", "", `JSON of client model id -> upstream model id, e.g. {"best":"llama3.1:70b"} (PLATFORM_LLM_MODELS)`)
	llmTimeout := flag.String("llm-timeout", "", "timeout of each upstream attempt, e.g. 60s (PLATFORM_LLM_TIMEOUT)")
	// The embeddings model of knowledge bases' semantic search: the flags
	// stand for the PLATFORM_EMBEDDINGS_* variables (docs/files.md).
	embModel := flag.String("embeddings-model", "", "embeddings model id; set, searchFiles ranks by vector similarity too (PLATFORM_EMBEDDINGS_MODEL)")
	embURL := flag.String("embeddings-url", "", "OpenAI-compatible base URL ending in /v1 of the embeddings model; default the LLM provider's (PLATFORM_EMBEDDINGS_URL)")
	embKey := flag.String("embeddings-api-key", "", "API key of that endpoint (PLATFORM_EMBEDDINGS_API_KEY); prefer the variable, a flag shows in ps")
	trusted := flag.String("trusted-proxies", "", "comma-separated CIDRs of the proxies in front of the platform whose X-Forwarded-For is believed; none: the client's address is the socket's peer ("+clientip.EnvTrustedProxies+")")
	// People's sign-in (docs/signin.md).
	signinFlags := map[string]*string{
		signin.EnvPublicURL:        flag.String("public-url", "", "the console's public base URL; the OpenID callback is <public-url>/auth/oidc/callback ("+signin.EnvPublicURL+")"),
		signin.EnvOIDCIssuer:       flag.String("oidc-issuer", "", "OpenID Connect issuer URL of the single sign-on provider ("+signin.EnvOIDCIssuer+")"),
		signin.EnvOIDCClientID:     flag.String("oidc-client-id", "", "client id registered at that provider ("+signin.EnvOIDCClientID+")"),
		signin.EnvOIDCClientSecret: flag.String("oidc-client-secret", "", "its client secret ("+signin.EnvOIDCClientSecret+"); prefer the variable, a flag shows in ps"),
		signin.EnvOIDCName:         flag.String("oidc-name", "", "the provider's display name on the sign-in page, \"Sign in with <name>\" ("+signin.EnvOIDCName+")"),
	}
	metricsToken := flag.String("metrics-token", "", "bearer token that /metrics requires (then from any address); none: loopback callers only ("+metrics.EnvToken+"); prefer the variable, a flag shows in ps")
	flag.Parse()
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
	o := local.Options{Addr: *addr, DataDir: *dataDir}
	if *reserve >= 0 {
		o.DiskReserveMiB = reserve
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := local.Run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "local platform:", err)
		os.Exit(1)
	}
}
