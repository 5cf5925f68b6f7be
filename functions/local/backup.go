package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/botforge/platform/shared/backup"
	"github.com/botforge/platform/shared/command"
	"github.com/botforge/platform/shared/local"
	"github.com/botforge/platform/shared/platform"
)

// The data directory's backups (shared/backup, docs/backup.md): taken now,
// listed, restored. A running platform is asked through its API (it owns
// its stores); a stopped data directory is read directly.

var backupCommand = command.Command{
	Name:    "backup",
	Summary: "back up the data directory now (a running platform or a stopped one), or list the backups",
	Run:     runBackup,
}

var restoreCommand = command.Command{
	Name:    "restore",
	Summary: "restore a backup into a stopped platform's data directory (or stage it on a running one)",
	Run:     runRestore,
}

type backupFlags struct {
	dataDir, backupDir, apiURL, token *string
}

func addBackupFlags(fs interface {
	String(name, value, usage string) *string
}) backupFlags {
	return backupFlags{
		dataDir:   fs.String("data-dir", "./.data", "the platform's data directory"),
		backupDir: fs.String("backup-dir", "", "directory of the backups (default: <data-dir>-backups; "+backup.EnvDir+")"),
		apiURL:    fs.String("api-url", "", "a running platform's URL, e.g. http://127.0.0.1:8080: it takes the backup, or stages the restore for its next start ($PLATFORM_API_URL)"),
		token:     fs.String("token", "", "the operator's personal access token (the first account's, <data-dir>/admin-token) ($PLATFORM_TOKEN)"),
	}
}

func (f backupFlags) resolve() {
	if *f.backupDir == "" {
		*f.backupDir = os.Getenv(backup.EnvDir)
	}
	if *f.backupDir == "" {
		*f.backupDir = local.DefaultBackupDir(*f.dataDir)
	}
	if *f.apiURL == "" {
		*f.apiURL = os.Getenv("PLATFORM_API_URL")
	}
	if *f.token == "" {
		*f.token = os.Getenv("PLATFORM_TOKEN")
	}
}

func runBackup(ctx context.Context, env command.Env, args []string) error {
	fs := command.FlagSet(env, "[flags]")
	f := addBackupFlags(fs)
	list := fs.Bool("list", false, "list the backups with their sizes instead of taking one")
	if err := command.Parse(fs, args, 0); err != nil {
		return err
	}
	f.resolve()
	if *f.apiURL != "" {
		var st platform.BackupStatus
		if *list {
			if err := apiCall(ctx, f, "GET", "/v1/admin/backups", &st); err != nil {
				return err
			}
			printBackups(env, st.Backups)
			return nil
		}
		var out struct{ Backup platform.Backup }
		if err := apiCall(ctx, f, "POST", "/v1/admin/backups", &out); err != nil {
			return err
		}
		printBackups(env, []platform.Backup{out.Backup})
		return nil
	}
	if *list {
		all, err := backup.List(*f.backupDir)
		if err != nil {
			return err
		}
		printBackups(env, all)
		return nil
	}
	b, err := backup.TakeStopped(*f.dataDir, *f.backupDir)
	if errors.Is(err, backup.ErrRunning) {
		return fmt.Errorf("%w: ask it to take the backup: %s --api-url http://<its address> --token $(cat %s)", err, env.Prog, filepath.Join(*f.dataDir, "admin-token"))
	}
	if err != nil {
		return err
	}
	printBackups(env, []platform.Backup{b})
	fmt.Fprintf(env.Stderr, "backed up %s into %s\n", *f.dataDir, filepath.Join(*f.backupDir, b.Name))
	return nil
}

func runRestore(ctx context.Context, env command.Env, args []string) error {
	fs := command.FlagSet(env, "[flags] <backup name or path>")
	f := addBackupFlags(fs)
	if err := command.Parse(fs, args, -1); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return command.Usagef("a backup is required (its name, as `backup --list` shows, or its path)")
	}
	// Flags may follow the backup's name too.
	name := fs.Arg(0)
	if err := command.Parse(fs, fs.Args()[1:], 0); err != nil {
		return err
	}
	f.resolve()
	if *f.apiURL != "" {
		var st platform.BackupStatus
		if err := apiCall(ctx, f, "POST", "/v1/admin/backups/"+url.PathEscape(name)+"/restore", &st); err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "restore of %s staged: it happens when the platform next starts (stop it and start it again)\n", st.PendingRestore)
		return nil
	}
	p, err := backup.Resolve(*f.backupDir, name)
	if err != nil {
		return err
	}
	aside, err := backup.Restore(p, *f.dataDir)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "restored %s into %s\n", p, *f.dataDir)
	if aside != "" {
		fmt.Fprintf(env.Stdout, "what %s held before is in %s (delete it when you no longer need it)\n", *f.dataDir, aside)
	}
	return nil
}

func printBackups(env command.Env, all []platform.Backup) {
	if len(all) == 0 {
		fmt.Fprintln(env.Stderr, "no backups")
		return
	}
	for _, b := range all {
		kind := "manual"
		if b.Scheduled {
			kind = "scheduled"
		}
		fmt.Fprintf(env.Stdout, "%s\t%s\t%s\t%s\n", b.Name, humanBytes(b.Size), b.Created.Local().Format(time.DateTime), kind)
	}
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// apiCall calls the running platform's API with the operator's token and
// decodes the answer into out; an API error is returned with its message.
func apiCall(ctx context.Context, f backupFlags, method, path string, out any) error {
	if *f.token == "" {
		return command.Usagef("--token (or PLATFORM_TOKEN) is required with --api-url")
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(*f.apiURL, "/")+path, bytes.NewReader(nil))
	if err != nil {
		return command.Usagef("--api-url: %v", err)
	}
	req.Header.Set("Authorization", "Bearer "+*f.token)
	res, err := (&http.Client{Timeout: 30 * time.Minute}).Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(res.Body, 16<<20))
	if res.StatusCode >= 300 {
		var e struct{ Message string }
		if json.Unmarshal(raw, &e) == nil && e.Message != "" {
			return fmt.Errorf("%s %s: %d: %s", method, path, res.StatusCode, e.Message)
		}
		return fmt.Errorf("%s %s: %d", method, path, res.StatusCode)
	}
	return json.Unmarshal(raw, out)
}
