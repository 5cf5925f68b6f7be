package command_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/botforge/platform/shared/command"
)

func TestMain(t *testing.T) {
	var ran []string
	serve := command.Command{Name: "serve", Summary: "serve", Run: func(ctx context.Context, env command.Env, args []string) error {
		fs := command.FlagSet(env, "[flags]")
		addr := fs.String("addr", "", "")
		if err := command.Parse(fs, args, 0); err != nil {
			return err
		}
		ran = append(ran, env.Prog+" addr="+*addr)
		return nil
	}}
	export := command.Command{Name: "export", Summary: "export", Run: func(ctx context.Context, env command.Env, args []string) error {
		fs := command.FlagSet(env, "<file>")
		if err := command.Parse(fs, args, 1); err != nil {
			return err
		}
		ran = append(ran, env.Prog+" "+strings.Join(fs.Args(), ","))
		return nil
	}}
	for _, tc := range []struct {
		args    []string
		code    int
		ran     string
		errText string
	}{
		{nil, 0, "local serve addr=", ""},
		{[]string{"--addr", ":1"}, 0, "local serve addr=:1", ""},
		{[]string{"serve", "--addr", ":2"}, 0, "local serve addr=:2", ""},
		{[]string{"export", "a.tar"}, 0, "local export a.tar", ""},
		{[]string{"bogus"}, 2, "", `unknown command "bogus"`},
		{[]string{"serve", "extra"}, 2, "", `unexpected argument "extra"`},
		{[]string{"--addr", ":1", "extra"}, 2, "", `unexpected argument "extra"`},
		{[]string{"export", "a", "b"}, 2, "", `unexpected argument "b"`},
		{[]string{"serve", "--nope"}, 2, "", "flag provided but not defined: -nope"},
		{[]string{"--help"}, 0, "", "commands:"},
		{[]string{"help"}, 0, "", "commands:"},
		{[]string{"serve", "--help"}, 0, "", "usage: local serve [flags]"},
	} {
		ran = nil
		var out, errOut bytes.Buffer
		code := command.Main(context.Background(), command.Env{Prog: "local", Stdout: &out, Stderr: &errOut}, []command.Command{serve, export}, "serve", tc.args)
		if code != tc.code {
			t.Errorf("%q: exit %d, want %d (stderr %s)", tc.args, code, tc.code, errOut.String())
		}
		got := strings.Join(ran, ";")
		if got != tc.ran {
			t.Errorf("%q: ran %q, want %q", tc.args, got, tc.ran)
		}
		if tc.errText != "" && !strings.Contains(errOut.String(), tc.errText) {
			t.Errorf("%q: stderr %q lacks %q", tc.args, errOut.String(), tc.errText)
		}
	}
}
