// Command issue-token gives an account a personal access token, creating the
// account when the email has none. It talks to the deployed stack's DynamoDB
// table directly with your AWS credentials, so it is how an operator makes
// the first account of a deployed platform, and how an invited person (see
// createWorkspaceMember) gets a token in AWS, where no mail is sent:
//
//	PLATFORM_TABLE=<table> AWS_REGION=<region> go run ./scripts/issue-token --email alice@example.com
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/runtime"
	"github.com/botforge/platform/shared/signin"
)

func main() {
	email := flag.String("email", "", "email of the account (created when missing)")
	note := flag.String("note", "issued by operator", "note shown in listPersonalAccessTokens")
	setup := flag.String("setup-link", "", "the console's base URL: also print (to stderr) a one-time link to set the account's password or link single sign-on (docs/signin.md)")
	flag.Parse()
	if *email == "" {
		fmt.Fprintln(os.Stderr, "usage: issue-token --email <email> [--note <note>]")
		os.Exit(2)
	}
	ctx := context.Background()
	env := runtime.FromEnv()
	cfg, err := runtime.AWSConfig(ctx)
	if err != nil {
		fail(err)
	}
	store := dynamo.New(runtime.DynamoClient(cfg, env, nil), env.Table)
	acct, created, err := store.EnsureAccount(ctx, *email)
	if err != nil {
		fail(err)
	}
	t, err := store.CreatePAT(ctx, acct.ID, *note)
	if err != nil {
		fail(err)
	}
	fmt.Fprintf(os.Stderr, "account %s (%s, created: %v)\n", acct.Email, acct.ID, created)
	if *setup != "" {
		link, err := signin.New(signin.Config{}, store, nil, nil, nil).NewSetupLink(ctx, *setup, acct)
		if err != nil {
			fail(err)
		}
		fmt.Fprintf(os.Stderr, "one-time setup link (7 days): %s\n", link)
	}
	fmt.Println(t.Value)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "issue-token:", err)
	os.Exit(1)
}
