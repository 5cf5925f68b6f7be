// Package command is the platform binary's small command layer: a table of
// named commands (serve, assistant, export, import, backup, restore...), each
// parsing its own flags. It exists so that an unknown word on the command
// line is an error, never a server started with the word ignored.
package command

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Command is one verb of the binary.
type Command struct {
	// Name is the word that selects it ("serve", "export").
	Name string
	// Summary is one line for the command list.
	Summary string
	// Run runs it with the arguments after its name. It returns ErrUsage
	// (or an error wrapping it) when the arguments are wrong; Main then
	// exits 2 instead of 1.
	Run func(ctx context.Context, env Env, args []string) error
}

// Env is what a command writes to; tests pass buffers.
type Env struct {
	Prog   string // the program's name and the command path, e.g. "local export"
	Stdout io.Writer
	Stderr io.Writer
}

// ErrUsage marks a usage error: the command has printed its usage already.
var ErrUsage = errors.New("usage error")

// Usagef is a usage error with a reason.
func Usagef(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrUsage, fmt.Sprintf(format, a...))
}

// Main runs the command named by args[0] and returns the process's exit code:
// 0 done, 1 failed, 2 usage error. When args is empty or starts with a flag,
// the default command runs with all of args (so "local --addr :8080" still
// serves).
func Main(ctx context.Context, env Env, cmds []Command, def string, args []string) int {
	err := Dispatch(ctx, env, cmds, def, args)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, ErrUsage):
		fmt.Fprintln(env.Stderr, env.Prog+":", strings.TrimPrefix(err.Error(), ErrUsage.Error()+": "))
		return 2
	default:
		fmt.Fprintln(env.Stderr, env.Prog+":", err)
		return 1
	}
}

// Dispatch is Main without the exit code, for commands that have
// subcommands of their own ("assistant create").
func Dispatch(ctx context.Context, env Env, cmds []Command, def string, args []string) error {
	byName := map[string]Command{}
	for _, c := range cmds {
		byName[c.Name] = c
	}
	name := def
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	} else if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
		name = "help" // "local --help": the commands; "local serve --help": serve's flags
	}
	if name == "help" {
		printList(env, cmds)
		return nil
	}
	c, ok := byName[name]
	if !ok {
		printList(env, cmds)
		if name == "" {
			return Usagef("a command is required")
		}
		return Usagef("unknown command %q", name)
	}
	sub := env
	sub.Prog = env.Prog + " " + c.Name
	return c.Run(ctx, sub, args)
}

func printList(env Env, cmds []Command) {
	sorted := append([]Command(nil), cmds...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	fmt.Fprintf(env.Stderr, "usage: %s <command> [flags]\n\ncommands:\n", env.Prog)
	for _, c := range sorted {
		fmt.Fprintf(env.Stderr, "  %-12s %s\n", c.Name, c.Summary)
	}
	fmt.Fprintf(env.Stderr, "\n%s <command> --help describes a command's flags.\n", env.Prog)
}

// FlagSet is a flag set for a command: errors are returned, not exited on,
// and the usage goes to env.Stderr.
func FlagSet(env Env, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(env.Prog, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(env.Stderr, "usage: %s %s\n\nflags:\n", env.Prog, usage)
		fs.PrintDefaults()
	}
	return fs
}

// Parse parses args into fs and refuses what no flag names: a positional
// argument is a usage error unless the command takes positional arguments
// (maxArgs >= 0 bounds them; -1 allows any number).
func Parse(fs *flag.FlagSet, args []string, maxArgs int) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return Usagef("%v", err)
	}
	if maxArgs >= 0 && fs.NArg() > maxArgs {
		fs.Usage()
		return Usagef("unexpected argument %q", fs.Arg(maxArgs))
	}
	return nil
}
