package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/botforge/platform/shared/assistant"
	"github.com/botforge/platform/shared/command"
)

// assistant create: deploy the platform's assistant bot to a running
// platform (docs/assistant.md); the logic is shared/assistant's.
var assistantCommand = command.Command{
	Name:    "assistant",
	Summary: "create an assistant bot that answers from your documents (assistant create --help)",
	Run: func(ctx context.Context, env command.Env, args []string) error {
		return command.Dispatch(ctx, env, []command.Command{{
			Name:    "create",
			Summary: "deploy an assistant (documents, instructions, model) to a running platform",
			Run:     assistantCreate,
		}}, "", args)
	},
}

// listFlag is a repeatable flag whose values may also be comma-separated.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

func assistantCreate(ctx context.Context, env command.Env, args []string) error {
	d := assistant.Defaults()
	fs := command.FlagSet(env, "--name NAME [--documents FILE ...] [flags]")
	apiURL := fs.String("api-url", "", "the platform's API URL (default $PLATFORM_API_URL, else http://127.0.0.1:8080)")
	token := fs.String("token", "", "a personal access token, developer role or above (default $PLATFORM_TOKEN, else ./.data/admin-token when it exists)")
	workspace := fs.String("workspace", "", "workspace id (default: the account's only workspace; one named Assistants is created when it has none)")
	name := fs.String("name", "", "the assistant's (bot's) name (required)")
	var documents, kbIDs listFlag
	fs.Var(&documents, "documents", "files uploaded and indexed as the assistant's knowledge base (repeat the flag or separate with commas; text, Markdown, HTML, JSON, CSV, PDF)")
	fs.Var(&kbIDs, "kb-ids", "ids of existing knowledge bases of the bot to search too (rarely useful for a new bot; comma-separated)")
	instructions := fs.String("instructions", d.Instructions, "the instructions (system prompt)")
	model := fs.String("model", d.Model, "the model: an id or alias of GET /v2/cognitive/models (best: the provider's first model)")
	temperature := fs.Float64("temperature", d.Temperature, "the model's temperature, 0 to 2")
	maxTokens := fs.Int("max-tokens", d.MaxTokens, "the longest answer, in tokens")
	passages := fs.Int("passages", d.Passages, "how many passages of the documents are sent with each question, 1 to 20")
	cite := fs.Bool("cite-sources", d.CiteSources, "end each answer with the names of the documents it came from")
	fallback := fs.String("fallback", d.FallbackMessage, "the answer when the documents do not hold one")
	history := fs.Int("history", d.HistoryMessages, "recent messages of the conversation sent with each question, 0 to 50 (also cut to the model's context)")
	handover := fs.Bool("handover", d.Handover, "hand the conversation to a human (the built-in hitl integration, docs/hitl.md) when the user asks for one or the model cannot answer")
	asJSON := fs.Bool("json", false, "print the result as JSON instead of two lines")
	if err := command.Parse(fs, args, 0); err != nil {
		return err
	}
	if strings.TrimSpace(*name) == "" {
		fs.Usage()
		return command.Usagef("--name is required")
	}
	setFlags := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { setFlags[f.Name] = true })
	if setFlags["temperature"] && (*temperature < 0 || *temperature > 2) {
		return command.Usagef("--temperature must be from 0 to 2")
	}
	if *passages < 1 || *passages > 20 {
		return command.Usagef("--passages must be from 1 to 20")
	}
	if *history < 0 || *history > 50 {
		return command.Usagef("--history must be from 0 to 50")
	}
	if *maxTokens < 1 {
		return command.Usagef("--max-tokens must be positive")
	}
	url := firstOf(*apiURL, os.Getenv("PLATFORM_API_URL"), "http://127.0.0.1:8080")
	tok := firstOf(*token, os.Getenv("PLATFORM_TOKEN"))
	if tok == "" {
		// After `make run`: the first account's token.
		if b, err := os.ReadFile(filepath.Join(".data", "admin-token")); err == nil {
			tok = strings.TrimSpace(string(b))
		}
	}
	if tok == "" {
		return command.Usagef("a token is required: --token or $PLATFORM_TOKEN")
	}
	s := d
	s.Instructions, s.Model, s.Temperature, s.MaxTokens = *instructions, *model, *temperature, *maxTokens
	s.Passages, s.CiteSources, s.FallbackMessage, s.HistoryMessages, s.Handover = *passages, *cite, *fallback, *history, *handover
	s.KBIDs = kbIDs
	o := assistant.Options{APIURL: url, Token: tok, Workspace: *workspace, Name: *name, Documents: documents, Settings: s}
	if isTerminal(env.Stderr) {
		o.Progress = env.Stderr
	}
	res, err := assistant.Create(ctx, o)
	if err != nil {
		var ae *assistant.APIError
		if errors.As(err, &ae) && ae.Status == 401 {
			return fmt.Errorf("%w (is the token right for %s?)", err, url)
		}
		return err
	}
	for _, doc := range res.Documents {
		if doc.Status != "indexing_completed" {
			fmt.Fprintf(env.Stderr, "warning: %s was not indexed (%s: %s): the assistant cannot search it\n", doc.Path, doc.Status, doc.Reason)
		}
	}
	if *asJSON {
		b, _ := json.MarshalIndent(res, "", "  ")
		fmt.Fprintln(env.Stdout, string(b))
		return nil
	}
	fmt.Fprintf(env.Stdout, "bot: %s\nwebchat: %s\n", res.BotID, res.WebchatURL)
	return nil
}

func firstOf(v ...string) string {
	for _, s := range v {
		if s != "" {
			return s
		}
	}
	return ""
}

// isTerminal: progress lines only for a person watching, quiet in scripts.
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
