package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/botforge/platform/shared/command"
	"github.com/botforge/platform/shared/transfer"
)

// export and import: a workspace or a bot to and from a portable archive
// (shared/transfer, docs/export-import.md).
var exportCommand = command.Command{
	Name:    "export",
	Summary: "export a workspace or a bot of any Botpress-compatible API to an archive file (resumes an interrupted export)",
	Run:     runExport,
}

var importCommand = command.Command{
	Name:    "import",
	Summary: "import an archive file into a workspace of this platform (idempotent, resumes an interrupted import)",
	Run:     runImport,
}

// apiFlags are the flags of commands that talk to a running platform.
func apiFlags(fs interface {
	String(name, value, usage string) *string
}) (apiURL, token *string) {
	apiURL = fs.String("api-url", "", "the API's URL (default $PLATFORM_API_URL, else http://localhost:8080); https://api.botpress.cloud works for an export")
	token = fs.String("token", "", "a personal access token (default $PLATFORM_TOKEN); prefer the variable, a flag shows in ps")
	return
}

func client(apiURL, token string) (*transfer.Client, error) {
	if apiURL == "" {
		apiURL = os.Getenv("PLATFORM_API_URL")
	}
	if apiURL == "" {
		apiURL = "http://localhost:8080"
	}
	if token == "" {
		token = os.Getenv("PLATFORM_TOKEN")
	}
	if token == "" {
		return nil, command.Usagef("--token or $PLATFORM_TOKEN is required")
	}
	return &transfer.Client{URL: apiURL, Token: token}, nil
}

func runExport(ctx context.Context, env command.Env, args []string) error {
	fs := command.FlagSet(env, "--workspace <id> [--bot <id>] --out <file> [flags]")
	apiURL, token := apiFlags(fs)
	ws := fs.String("workspace", "", "the workspace to export (required)")
	bot := fs.String("bot", "", "export this bot only (default: the whole workspace with its members)")
	out := fs.String("out", "", "the archive file to write (required); <out>.journal keeps an interrupted export's progress")
	pass := fs.String("passphrase", "", "export installed integrations' configurations encrypted with this passphrase (default $PLATFORM_PASSPHRASE; none: they are left out)")
	if err := command.Parse(fs, args, 0); err != nil {
		return err
	}
	if *ws == "" || *out == "" {
		fs.Usage()
		return command.Usagef("--workspace and --out are required")
	}
	c, err := client(*apiURL, *token)
	if err != nil {
		return err
	}
	if *pass == "" {
		*pass = os.Getenv("PLATFORM_PASSPHRASE")
	}
	bar := newBar(env.Stderr, "export")
	rep, err := transfer.Export{Client: c, Workspace: *ws, Bot: *bot, Out: *out, Passphrase: *pass, Progress: bar.show}.Run(ctx)
	bar.done()
	if err != nil {
		return err
	}
	resumed := ""
	if rep.Resumed {
		resumed = " (resumed)"
	}
	fmt.Fprintf(env.Stdout, "exported %d entries, %d bytes to %s%s\n", rep.Entries, rep.Bytes, *out, resumed)
	for _, n := range rep.Notes {
		fmt.Fprintln(env.Stdout, "note:", n)
	}
	return nil
}

func runImport(ctx context.Context, env command.Env, args []string) error {
	fs := command.FlagSet(env, "--workspace <id> --in <file> [flags]")
	apiURL, token := apiFlags(fs)
	ws := fs.String("workspace", "", "the workspace to import into (required; an administrator's token)")
	in := fs.String("in", "", "the archive file (required); <in>.import-journal keeps an interrupted import's progress")
	pass := fs.String("passphrase", "", "the passphrase the archive's secrets were exported with (default $PLATFORM_PASSPHRASE; none: they are not imported)")
	dry := fs.Bool("dry-run", false, "say what would change, change nothing")
	remap := fs.Bool("remap", false, "give every record a new id (references follow), e.g. to import a copy beside the original")
	if err := command.Parse(fs, args, 0); err != nil {
		return err
	}
	if *ws == "" || *in == "" {
		fs.Usage()
		return command.Usagef("--workspace and --in are required")
	}
	c, err := client(*apiURL, *token)
	if err != nil {
		return err
	}
	if *pass == "" {
		*pass = os.Getenv("PLATFORM_PASSPHRASE")
	}
	var size int64
	if st, err := os.Stat(*in); err == nil {
		size = st.Size()
	}
	bar := newBar(env.Stderr, "import")
	bar.total = size
	rep, err := transfer.Import{Client: c, Workspace: *ws, In: *in, Passphrase: *pass, DryRun: *dry, Remap: *remap, Progress: bar.show}.Run(ctx)
	bar.done()
	if err != nil {
		return err
	}
	verb := "imported"
	if rep.DryRun {
		verb = "dry run, nothing written: would import"
	}
	resumed := ""
	if rep.Resumed {
		resumed = " (resumed)"
	}
	fmt.Fprintf(env.Stdout, "%s %d entries%s: %d created, %d unchanged, %d conflicts, %d skipped, %d failed\n",
		verb, rep.Entries, resumed, rep.Created, rep.Unchanged, rep.Conflicts, rep.Skipped, rep.Failed)
	for _, m := range rep.Messages {
		fmt.Fprintln(env.Stdout, m)
	}
	if rep.Failed > 0 {
		return fmt.Errorf("%d entries failed", rep.Failed)
	}
	return nil
}

// bar is a progress line on a terminal; nothing otherwise (scripts).
type bar struct {
	w     io.Writer
	what  string
	on    bool
	total int64
	last  time.Time
	start time.Time
}

func newBar(w io.Writer, what string) *bar {
	b := &bar{w: w, what: what, start: time.Now()}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			b.on = true
		}
	}
	return b
}

func (b *bar) show(p transfer.Progress) {
	if !b.on || time.Since(b.last) < 100*time.Millisecond {
		return
	}
	b.last = time.Now()
	mb := float64(p.Bytes) / (1 << 20)
	rate := mb / max(time.Since(b.start).Seconds(), 0.001)
	if b.total > 0 {
		const width = 30
		n := int(float64(width) * float64(p.Bytes) / float64(b.total))
		n = min(max(n, 0), width)
		fmt.Fprintf(b.w, "\r%s [%-*s] %3.0f%% %d entries, %.1f MB (%.1f MB/s)  ", b.what, width, string(repeat('#', n)), 100*float64(p.Bytes)/float64(b.total), p.Entries, mb, rate)
		return
	}
	fmt.Fprintf(b.w, "\r%s: %d entries, %.1f MB (%.1f MB/s) %-40.40s", b.what, p.Entries, mb, rate, p.Unit)
}

func repeat(c byte, n int) []byte {
	out := make([]byte, n)
	for i := range out {
		out[i] = c
	}
	return out
}

func (b *bar) done() {
	if b.on && !b.last.IsZero() {
		fmt.Fprintln(b.w)
	}
}
