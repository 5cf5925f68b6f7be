package iampolicy

import "testing"

func TestEvaluate(t *testing.T) {
	table := "arn:aws:dynamodb:us-east-1:1:table/t"
	st := []Statement{
		{Effect: "Allow", Action: []string{"dynamodb:GetItem", "dynamodb:Put*"}, Resource: []string{table, table + "/index/*"}},
		{Effect: "Allow", Action: []string{"iam:PassRole"}, Resource: []string{"arn:aws:iam::1:role/x"},
			Condition: map[string]map[string][]string{"StringEquals": {"iam:PassedToService": {"scheduler.amazonaws.com"}}}},
		{Effect: "Allow", Action: []string{"s3:GetObject"}, Resource: []string{"arn:aws:s3:::b/files/*"}},
		{Effect: "Deny", Action: []string{"s3:*"}, Resource: []string{"arn:aws:s3:::b/files/secret?"}},
		{Effect: "Allow", NotAction: []string{"logs:*"}, Resource: []string{"arn:aws:sqs:*"}},
	}
	cases := []struct {
		name string
		req  Request
		want Decision
	}{
		{"listed action", Request{Action: "dynamodb:GetItem", Resource: table}, Allow},
		{"actions ignore case", Request{Action: "DynamoDB:getitem", Resource: table}, Allow},
		{"action wildcard", Request{Action: "dynamodb:PutItem", Resource: table}, Allow},
		{"index wildcard", Request{Action: "dynamodb:GetItem", Resource: table + "/index/gsi1"}, Allow},
		{"another action", Request{Action: "dynamodb:Scan", Resource: table}, ImplicitDeny},
		{"another table", Request{Action: "dynamodb:GetItem", Resource: table + "2"}, ImplicitDeny},
		{"resources are case-sensitive", Request{Action: "dynamodb:GetItem", Resource: "arn:aws:dynamodb:us-east-1:1:table/T"}, ImplicitDeny},
		{"condition holds", Request{Action: "iam:PassRole", Resource: "arn:aws:iam::1:role/x", Context: map[string]string{"iam:PassedToService": "scheduler.amazonaws.com"}}, Allow},
		{"condition fails", Request{Action: "iam:PassRole", Resource: "arn:aws:iam::1:role/x", Context: map[string]string{"iam:PassedToService": "lambda.amazonaws.com"}}, ImplicitDeny},
		{"condition key missing", Request{Action: "iam:PassRole", Resource: "arn:aws:iam::1:role/x"}, ImplicitDeny},
		{"prefix wildcard", Request{Action: "s3:GetObject", Resource: "arn:aws:s3:::b/files/a/b"}, Allow},
		{"explicit deny wins", Request{Action: "s3:GetObject", Resource: "arn:aws:s3:::b/files/secret1"}, ExplicitDeny},
		{"? is one character", Request{Action: "s3:GetObject", Resource: "arn:aws:s3:::b/files/secret12"}, Allow},
		{"NotAction", Request{Action: "sqs:SendMessage", Resource: "arn:aws:sqs:us-east-1:1:q"}, Allow},
		{"NotAction excludes", Request{Action: "logs:PutLogEvents", Resource: "arn:aws:sqs:us-east-1:1:q"}, ImplicitDeny},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got, _ := Evaluate(st, tc.req); got != tc.want {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		p, s string
		want bool
	}{
		{"*", "", true}, {"a*c", "abbc", true}, {"a*c", "abbd", false}, {"a?c", "abc", true}, {"a?c", "ac", false},
		{"*/code/*", "arn:b/code/x", true}, {"a**b", "ab", true}, {"", "", true}, {"", "a", false},
	} {
		if got := Match(tc.p, tc.s); got != tc.want {
			t.Errorf("Match(%q, %q) = %v", tc.p, tc.s, got)
		}
	}
}

func TestParseStatements(t *testing.T) {
	st, err := ParseStatements([]any{map[string]any{"Effect": "Allow", "Action": "s3:GetObject", "Resource": []any{"a", "b"},
		"Condition": map[string]any{"Bool": map[string]any{"aws:SecureTransport": false}}}})
	if err != nil || len(st) != 1 || len(st[0].Resource) != 2 || st[0].Condition["Bool"]["aws:SecureTransport"][0] != "false" {
		t.Fatalf("%+v %v", st, err)
	}
	if _, err := ParseStatements([]any{map[string]any{"Effect": "Maybe", "Action": "x", "Resource": "y"}}); err == nil {
		t.Fatal("an Effect other than Allow or Deny was taken")
	}
	if _, err := ParseStatements([]any{map[string]any{"Effect": "Allow", "Action": map[string]any{"Ref": "X"}, "Resource": "y"}}); err == nil {
		t.Fatal("an unresolved intrinsic was taken")
	}
}
