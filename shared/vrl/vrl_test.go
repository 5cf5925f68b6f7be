package vrl

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
)

func fixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func webhook(method, query, body string, headers map[string]any) map[string]any {
	if headers == nil {
		headers = map[string]any{}
	}
	return map[string]any{
		"body": body, "query": query, "path": "/", "method": method, "headers": headers,
		"secrets": map[string]any{"VERIFY_TOKEN": "tok", "SANDBOX_VERIFY_TOKEN": "sbx", "SANDBOX_CLIENT_SECRET": "csecret", "SHOPIFY_CLIENT_SECRET": "ssecret"},
		"env":     "production", "webhookId": "wh_123", "webhookUrl": "https://webhook.example.com",
	}
}

func with(ev map[string]any, k string, v any) map[string]any {
	out := map[string]any{}
	for a, b := range ev {
		out[a] = b
	}
	out[k] = v
	return out
}

func hmacHex(body, key string) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(body))
	return hex.EncodeToString(m.Sum(nil))
}

func hmacSHA512(body, key string) string {
	m := hmac.New(sha512.New, []byte(key))
	m.Write([]byte(body))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

func hmacB64(body, key string) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(body))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

const pageBody = `{"object":"page","entry":[{"id":"1234567890","time":1700000000,"messaging":[{"sender":{"id":"42"},"recipient":{"id":"1234567890"},"message":{"mid":"m1","text":"hi"}}]}]}`

const waBody = `{"object":"whatsapp_business_account","entry":[{"id":"WABA1","changes":[{"value":{"contacts":[{"wa_id":"15551234567"}],"messages":[{"text":{"body":"shareable-1"}}]}}]}]}`

// TestBotpressScripts runs real Botpress integration scripts on realistic
// webhook requests.
func TestBotpressScripts(t *testing.T) {
	gmailData := base64.StdEncoding.EncodeToString([]byte(`{"emailAddress":"me@example.com","historyId":9}`))
	cases := []struct {
		name, script string
		event        map[string]any
		want         any
	}{
		{"messenger extract page", "messenger_extract.vrl", webhook("POST", "", pageBody, nil), "1234567890"},
		{"messenger extract other object", "messenger_extract.vrl", webhook("POST", "", `{"object":"user"}`, nil), nil},
		{"messenger fallback challenge", "messenger_fallback.vrl",
			webhook("GET", "hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=tok", "", nil),
			map[string]any{"headers": map[string]any{"content-type": "application/json"}, "body": "1158201444"}},
		{"github extract", "github_extract.vrl", webhook("POST", "", `{"action":"opened","installation":{"id":98765432}}`, nil), "98765432"},
		{"hubspot extract", "hubspot_extract.vrl", webhook("POST", "", `[{"portalId":4455,"eventId":1}]`, nil), "4455"},
		{"linear extract", "linear_extract.vrl", webhook("POST", "", `{"organizationId":"org-1","type":"Issue"}`, nil), "org-1"},
		{"gmail extract", "gmail_extract.vrl", webhook("POST", "", `{"message":{"data":"`+gmailData+`","messageId":"1"}}`, nil), "me@example.com"},
		{"slack extract interactive", "slack_extract.vrl", webhook("POST", "", "payload=%7B%22team_id%22%3A%22T0123%22%7D", nil), "T0123"},
		{"slack fallback url_verification", "slack_fallback.vrl", webhook("POST", "", `{"type":"url_verification","challenge":"3eZbrw1a"}`, nil),
			map[string]any{"body": `{"challenge":"3eZbrw1a"}`}},
		{"facebook extract", "facebook_extract.vrl", webhook("POST", "", pageBody, nil), "1234567890"},
		{"facebook fallback verify ok", "facebook_fallback.vrl",
			webhook("GET", "hub.mode=subscribe&hub.challenge=777&hub.verify_token=tok", "", nil),
			map[string]any{"status": int64(200), "headers": map[string]any{"content-type": "application/json"}, "body": "777"}},
		{"facebook fallback bad token", "facebook_fallback.vrl",
			webhook("GET", "hub.mode=subscribe&hub.challenge=777&hub.verify_token=nope", "", nil),
			map[string]any{"status": int64(403), "body": "Invalid verify token"}},
		{"facebook fallback sandbox token", "facebook_fallback.vrl",
			with(webhook("GET", "hub.mode=subscribe&hub.challenge=9&hub.verify_token=sbx", "", nil), "path", "/sandbox/x"),
			map[string]any{"status": int64(200), "headers": map[string]any{"content-type": "application/json"}, "body": "9"}},
		{"facebook fallback unlinked sandbox", "facebook_fallback.vrl",
			with(webhook("POST", "", pageBody, nil), "path", "/sandbox"),
			map[string]any{"status": int64(200), "body": "Conversation not linked to a bot"}},
		{"facebook fallback other", "facebook_fallback.vrl", webhook("POST", "", pageBody, nil),
			map[string]any{"status": int64(403), "body": "Invalid webhook request"}},
		{"whatsapp extract oauth state", "whatsapp_extract.vrl", webhook("GET", "code=abc&state=wh_42", "", nil), "wh_42"},
		{"whatsapp extract body", "whatsapp_extract.vrl", webhook("POST", "", waBody, nil), "WABA1"},
		{"whatsapp fallback verify", "whatsapp_fallback.vrl",
			webhook("GET", "hub.mode=subscribe&hub.challenge=31337&hub.verify_token=0IjoxNTE2Mj", "", nil),
			map[string]any{"status": int64(200), "headers": map[string]any{"content-type": "application/json"}, "body": "31337"}},
		{"whatsapp fallback default", "whatsapp_fallback.vrl", webhook("POST", "", waBody, nil),
			map[string]any{"status": int64(403), "body": "Invalid webhook request"}},
		{"whatsapp sandbox signed", "whatsapp_sandbox_extract.vrl",
			webhook("POST", "", waBody, map[string]any{"x-hub-signature-256": "sha256=" + hmacHex(waBody, "csecret")}), "15551234567"},
		{"whatsapp sandbox bad signature", "whatsapp_sandbox_extract.vrl",
			webhook("POST", "", waBody, map[string]any{"x-hub-signature-256": "sha256=00"}), nil},
		{"shopify fallback authentic", "shopify_fallback.vrl",
			webhook("POST", "", `{"shop_id":1}`, map[string]any{"x-shopify-hmac-sha256": hmacB64(`{"shop_id":1}`, "ssecret")}),
			map[string]any{"status": int64(200), "body": ""}},
		{"shopify fallback forged", "shopify_fallback.vrl",
			webhook("POST", "", `{"shop_id":1}`, map[string]any{"x-shopify-hmac-sha256": "AAAA"}),
			map[string]any{"status": int64(401), "body": "Invalid HMAC signature"}},
		{"sunco extract message source", "sunco_extract.vrl",
			webhook("POST", "", `{"events":[{"payload":{"message":{"source":{"integrationId":"int-1"}}}}]}`, nil), "int-1"},
		{"sunco extract conversation owner", "sunco_extract.vrl",
			webhook("POST", "", `{"events":[{"payload":{"conversation":{"metadata":{"botpressIntegrationOwner":"own-2"}}}}]}`, nil), "own-2"},
		{"zendesk hitl extract", "zendesk_hitl_extract.vrl",
			webhook("POST", "", `{"events":[{"payload":{"conversation":{"metadata":{"botpressIntegrationOwner":"own-3"}}}}]}`, nil), "own-3"},
		{"zendesk hitl extract missing", "zendesk_hitl_extract.vrl", webhook("POST", "", `{"events":[]}`, nil), nil},
		// "+" fails on an object, err is set and assert is skipped.
		{"notion fallback token not a string", "notion_fallback.vrl", webhook("POST", "", `{"verification_token":{"a":1}}`, nil), map[string]any{}},
		{"salesforce fallback redirect", "salesforce_fallback.vrl", webhook("GET", "state=wh_9&code=c0de", "", nil),
			map[string]any{"status": int64(302), "headers": map[string]any{"Location": "https://webhook.botpress.cloud/wh_9/success?code=c0de"}, "body": ""}},
		{"salesforce fallback missing", "salesforce_fallback.vrl", webhook("GET", "code=c0de&code=again", "", nil),
			map[string]any{"status": int64(302), "headers": map[string]any{"Location": "https://app.botpress.cloud/notfound"}, "body": ""}},
		{"googlecalendar link", "googlecalendar_link.vrl", webhook("GET", "", "", nil),
			"https://accounts.google.com/o/oauth2/v2/auth?scope=https%3A%2F%2Fwww%2Egoogleapis%2Ecom%2Fauth%2Fcalendar%2Eevents%20https%3A%2F%2Fwww%2Egoogleapis%2Ecom%2Fauth%2Fcalendar%2Ereadonly&state=wh_123&redirect_uri=https://webhook.example.com/oauth&client_id=prod-client"},
		{"bamboohr link", "bamboohr_link.vrl", with(webhook("GET", "", "", nil), "env", "staging"),
			"https://www.bamboohr.com/authorize.php?scope=email%2Bopenid%2Bemployee%3Aread%2Bemployee%5Fdirectory%3Aread&client_id=dev&state=wh_123&redirect_uri=https://webhook.example.com/oauth"},
		{"hubspot link without source", "hubspot_link.vrl", webhook("GET", "", "", nil),
			"https://webhook.example.com/oauth/wizard/start?state=wh_123&source="},
		{"hubspot link with source", "hubspot_link.vrl", with(webhook("GET", "", "", nil), "source", "marketplace"),
			"https://webhook.example.com/oauth/wizard/start?state=wh_123&source=marketplace"},
		{"messenger link", "messenger_link.vrl", webhook("GET", "", "", nil),
			`https://www.facebook.com/v19.0/dialog/oauth?client_id=1198248357833460&redirect_uri=https://webhook.example.com/oauth&state=wh_123&extras={"sessionInfoVersion":2}`},
		{"messenger sandbox link", "messenger_sandbox_link.vrl", with(webhook("GET", "", "", nil), "shareableId", "s-1"),
			"https://m.me/647427158463603?text=s-1"},
		{"zendesk link last expression wins", "zendesk_link.vrl", webhook("GET", "", "", nil),
			"https://webhook.example.com/oauth/wizard/start?state=wh_123"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Compile(fixture(t, tc.script))
			if err != nil {
				t.Fatalf("compile: %v", err)
			}
			got, err := p.Run(tc.event)
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %#v, want %#v", got, tc.want)
			}
		})
	}
}

// TestBotpressScriptErrors: real scripts on requests they reject, and the
// scripts that VRL itself does not compile.
func TestBotpressScriptErrors(t *testing.T) {
	runErr := []struct {
		name, script string
		event        map[string]any
		want         string
	}{
		{"messenger extract non-json body", "messenger_extract.vrl", webhook("POST", "", "not json", nil), `function call error for "parse_json"`},
		{"github extract without installation", "github_extract.vrl", webhook("POST", "", `{"zen":"x","installation":{"id":{"a":1}}}`, nil), `function call error for "to_string"`},
		{"notion fallback logs token", "notion_fallback.vrl", webhook("POST", "", `{"verification_token":"secret_abc"}`, nil), "Notion verification token received: secret_abc"},
		// "string" + null is the string in VRL, so err is null and assert aborts here too.
		{"notion fallback no token", "notion_fallback.vrl", webhook("POST", "", `{"type":"page.created"}`, nil), "Notion verification token received: "},
		{"link without webhookUrl", "hubspot_link.vrl", with(webhook("GET", "", "", nil), "webhookUrl", map[string]any{}), `"to_string"`},
	}
	for _, tc := range runErr {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Compile(fixture(t, tc.script))
			if err != nil {
				t.Fatalf("compile: %v", err)
			}
			got, err := p.Run(tc.event)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %#v, %v; want error containing %q", got, err, tc.want)
			}
		})
	}
	compileErr := []struct{ script, want string }{
		// "if message.is_echo": the predicate may be any JSON value (VRL E102).
		{"instagram_sandbox_shareable.vrl", "4:17: non-boolean predicate"},
		// "parts[length(parts) - 1]": VRL path indexes are integer literals
		// (and "body.actor ?? ..." would then fail as E651: it can't fail).
		{"linkedin_extract.vrl", "5:11: syntax error: path index must be an integer literal"},
		// "env" is never assigned (VRL E701).
		{"googledrive_link.vrl", `undefined variable "env"`},
	}
	for _, tc := range compileErr {
		t.Run(tc.script, func(t *testing.T) {
			_, err := Compile(fixture(t, tc.script))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want compile error containing %q", err, tc.want)
			}
		})
	}
}

func eval(t *testing.T, src string, event any) (any, error) {
	t.Helper()
	p, err := Compile(src)
	if err != nil {
		return nil, err
	}
	return p.Run(event)
}

func TestExpressions(t *testing.T) {
	ev := map[string]any{
		"a": map[string]any{"b": []any{int64(1), int64(2), int64(3)}, "dotted.key": "dk"},
		"s": "hello", "n": 7, "f": 2.5, "t": true, "nil": nil,
	}
	cases := []struct {
		src  string
		want any
	}{
		// literals
		{`"a\tb\n\"c\"\\ \u{1F600}"`, "a\tb\n\"c\"\\ \U0001F600"},
		{`s'raw \n {{ x }}'`, `raw \n {{ x }}`},
		{`42`, int64(42)},
		{`-3`, int64(-3)},
		{`1_000`, int64(1000)},
		{`1.5`, 1.5},
		{`true; false`, false},
		{`null`, nil},
		{`[1, "a", [true], {}]`, []any{int64(1), "a", []any{true}, map[string]any{}}},
		{`{"a": 1, "b": {"c": null}}`, map[string]any{"a": int64(1), "b": map[string]any{"c": nil}}},
		{"x = 1; x", int64(1)},
		{"# comment only\n1 # trailing\n", int64(1)},
		// paths
		{`.a.b[1]`, int64(2)},
		{`.a.b[-1]`, int64(3)},
		{`.a.b[5]`, nil},
		{`.a."dotted.key"`, "dk"},
		{`.missing.deep[0].x`, nil},
		{`.s.x`, nil},
		{`x = .a; x.b[0]`, int64(1)},
		{`[10, 20, 30][1]`, int64(20)},
		{`{"k": {"j": 5}}.k.j`, int64(5)},
		{`(.a).b[2]`, int64(3)},
		{`parse_json!("{\"x\": [1, {\"y\": 2}]}").x[1].y`, int64(2)},
		// assignment
		{`.new.deep[1] = "v"; .new`, map[string]any{"deep": []any{nil, "v"}}},
		{`x = {}; x.a.b = 1; x`, map[string]any{"a": map[string]any{"b": int64(1)}}},
		{`x = [1]; y = x; y[0] = 2; [x, y]`, []any{[]any{int64(1)}, []any{int64(2)}}},
		{`. = {"only": 1}; .`, map[string]any{"only": int64(1)}},
		{`_ = 5; 6`, int64(6)},
		{`x = y = 3; x + y`, int64(6)},
		{`v = del(.a.b); [v, .a]`, []any{[]any{int64(1), int64(2), int64(3)}, map[string]any{"dotted.key": "dk"}}},
		// operators and precedence
		{`1 + 2 * 3`, int64(7)},
		{`(1 + 2) * 3`, int64(9)},
		{`10 - 4 - 3`, int64(3)},
		{`7 / 2`, 3.5},
		{`1 + 1.5`, 2.5},
		{`"a" + "b" + "c"`, "abc"},
		{`"a" + null`, "a"},
		{`"ab" * 3`, "ababab"},
		{`1 < 2 && 2 <= 2`, true},
		{`"b" > "a"`, true},
		{`1 == 1.0`, true},
		{`[1] == [1]`, true},
		{`{"a": 1} != {"a": 2}`, true},
		{`!true || true`, true},
		{`!(true && false)`, true},
		{`true || false && false`, false}, // "||" and "&&" share a level, left to right
		{`null || "fallback"`, "fallback"},
		{`"set" || "fallback"`, "set"},
		{`null && true`, false},
		{`{"a": 1} | {"b": 2}`, map[string]any{"a": int64(1), "b": int64(2)}},
		{strings.Repeat("[", 40) + strings.Repeat("]", 40) + " == []", false},
		{strings.Repeat("{ ", 30) + "1" + strings.Repeat(" }", 30), int64(1)},
		{`to_int("x") ?? 5`, int64(5)},
		{`to_int("12") ?? 5`, int64(12)},
		{`"n: " + to_string(.n) ?? "bad"`, "n: 7"}, // "??" binds loosest
		{`.n + 1 ?? 0`, int64(8)},
		{`.s + 1 ?? "failed"`, "failed"},
		{`.f * 2 ?? 0`, 5.0},
		// if and blocks
		{`if .t == true { "yes" } else { "no" }`, "yes"},
		{`_, err = 7 / 0; err`, "can't divide by zero"},
		{`"ab" * -1`, ""},
		{`if .n == 1 { "one" } else if .n == 7 { "seven" } else { "other" }`, "seven"},
		{`if false { 1 }`, nil},
		{"if false {\n  1\n}\nelse {\n  2\n}", int64(2)},
		{`x = if true { 1 } else { 2 }; x`, int64(1)},
		{`x = { a = 2; a * 3 }; x`, int64(6)},
		{"x = 1\nif true {\n  x = 2\n  y = 5\n}\nx", int64(2)},
		// error assignment
		{`v, err = parse_json("{"); [v, err != null]`, []any{nil, true}},
		{`v, err = to_int("5"); [v, err]`, []any{int64(5), nil}},
		{`v, err = to_string(.a); v`, ""},
		{`_, err = parse_json("1"); err`, nil},
		// closures
		{`out = []; for_each([1, 2, 3]) -> |i, v| { out = push(out, v * 10) }; out`, []any{int64(10), int64(20), int64(30)}},
		{`ks = ""; for_each({"b": 1, "a": 2}) -> |k, _v| { ks = ks + k }; ks`, "ab"},
		// string templates
		{`name = "bot"; "hi {{ name }}!"`, "hi bot!"},
		{`a = "x"; b = "y"; "{{a}}{{ b }}"`, "xy"},
		{`"{single} braces"`, "{single} braces"},
	}
	for _, tc := range cases {
		t.Run(tc.src, func(t *testing.T) {
			got, err := eval(t, tc.src, ev)
			if err != nil {
				t.Fatalf("error: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %#v, want %#v", got, tc.want)
			}
		})
	}
	// The event passed in is never modified.
	if _, ok := ev["new"]; ok {
		t.Fatal("event was modified")
	}
	if b := ev["a"].(map[string]any)["b"].([]any); len(b) != 3 {
		t.Fatal("event was modified by del")
	}
}

func TestFunctions(t *testing.T) {
	cases := []struct {
		src  string
		want any
	}{
		{`parse_json!("[1, 2.5, \"x\", true, null, {\"k\": 9007199254740993}]")`, []any{int64(1), 2.5, "x", true, nil, map[string]any{"k": int64(9007199254740993)}}},
		{`parse_json!("{\"a\":{\"b\":1}}", max_depth: 1)`, map[string]any{"a": `{"b":1}`}},
		{`parse_query_string("?a=1&b=x+y%21&a=2&flag&=e")`, map[string]any{"a": []any{"1", "2"}, "b": "x y!", "flag": "", "": "e"}},
		{`to_string(12)`, "12"},
		{`to_string(1.5)`, "1.5"},
		{`to_string(true)`, "true"},
		{`to_string(null)`, ""},
		{`to_int!("42")`, int64(42)},
		{`to_int(3.9)`, int64(3)},
		{`to_float!("2.5")`, 2.5},
		{`to_bool!("yes")`, true},
		{`string!("s")`, "s"},
		{`int!(4)`, int64(4)},
		{`[is_string("a"), is_null(null), is_object({}), is_array([]), is_boolean(1), is_integer(1), is_float(1.0)]`, []any{true, true, true, true, false, true, true}},
		{`is_empty("")`, true},
		{`x = {"a": null}; [exists(x.a), exists(x.b), exists(.q)]`, []any{true, false, false}},
		{`get!({"a": [{"b": 1}]}, ["a", 0, "b"])`, int64(1)},
		{`get!({"a": 1}, ["z"])`, nil},
		{`[contains("Hello", "ell"), contains("Hello", "ELL"), contains("Hello", "ELL", case_sensitive: false)]`, []any{true, false, true}},
		{`[starts_with("/sandbox/x", "/sandbox"), ends_with("file.vrl", ".vrl"), starts_with("a", "b")]`, []any{true, true, false}},
		{`[upcase("abc"), downcase("ABC"), strip_whitespace("  x ")]`, []any{"ABC", "abc", "x"}},
		{`split("a,b,,c", ",")`, []any{"a", "b", "", "c"}},
		{`split("a,b,c", ",", limit: 2)`, []any{"a", "b,c"}},
		{`join!(["a", "b"], "-")`, "a-b"},
		{`join!(["a", "b"])`, "ab"},
		{`encode_base16(hmac("body", "key", algorithm: "sha-256"))`, hmacHex("body", "key")},
		{`_, err = hmac("b", "k", algorithm: to_string(.a) ?? "x"); err`, `function call error for "hmac": Invalid algorithm: `},
		{`[length("héllo"), length([1, 2]), length({"a": 1})]`, []any{int64(6), int64(2), int64(1)}},
		{`encode_json({"b": [1, 2.0, "x<y>"], "a": null})`, `{"a":null,"b":[1,2.0,"x<y>"]}`},
		{`encode_base64("hello?")`, "aGVsbG8/"},
		{`encode_base64("hello?", charset: "url_safe", padding: false)`, "aGVsbG8_"},
		{`decode_base64!("aGVsbG8")`, "hello"},
		{`decode_base64!("aGVsbG8=")`, "hello"},
		{`encode_base16("hi")`, "6869"},
		{`decode_base16!("6869")`, "hi"},
		{`encode_percent("a b/c~d")`, "a%20b%2Fc%7Ed"},
		{`encode_percent("a b/c~d", ascii_set: "COMPONENT")`, "a%20b%2Fc~d"},
		{`decode_percent("a%20b%zz+c")`, "a b%zz+c"},
		{`replace("a-b-c", "-", "+")`, "a+b+c"},
		{`replace("a-b-c", "-", "+", count: 1)`, "a+b-c"},
		{`encode_base16(hmac("body", "key"))`, hmacHex("body", "key")},
		{`encode_base64(hmac("body", "key", algorithm: "SHA-512"))`, hmacSHA512("body", "key")},
		{`sha1("abc")`, "a9993e364706816aba3e25717850c26c9cd0d89d"},
		{`sha2("abc", variant: "SHA-256")`, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
		{`md5("abc")`, "900150983cd24fb0d6963f7d28e17f72"},
		{`assert!(1 == 1)`, true},
		{`keys({"b": 1, "a": 2})`, []any{"a", "b"}},
		{`values({"b": 1, "a": 2})`, []any{int64(2), int64(1)}},
		{`append([1], [2, 3])`, []any{int64(1), int64(2), int64(3)}},
		{`merge({"a": {"x": 1}}, {"a": {"y": 2}}, deep: true)`, map[string]any{"a": map[string]any{"x": int64(1), "y": int64(2)}}},
	}
	for _, tc := range cases {
		t.Run(tc.src, func(t *testing.T) {
			got, err := eval(t, tc.src, map[string]any{})
			if err != nil {
				t.Fatalf("error: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %#v, want %#v", got, tc.want)
			}
		})
	}
}

func TestCompileErrors(t *testing.T) {
	cases := []struct{ src, want string }{
		{`foo(1)`, `1:1: call to undefined function "foo"`},
		{"x = 1\ny = (1 +\n", "3:1: syntax error"},
		{"x = [1, 2", "1:10: syntax error: unexpected end of program"},
		{`"unterminated`, "1:1: unterminated string literal"},
		{`"bad \q escape"`, `invalid escape character \q`},
		{"x = 1\n  y $ 2", `2:5: syntax error: unexpected invalid character "$"`},
		{`parse_json(.body)`, "1:1: unhandled fallible expression"},
		{`x = parse_json(.body)`, "1:5: unhandled fallible expression"},
		{`upcase(.name)`, "unhandled fallible expression"},
		{`upcase(parse_json(.x) ?? "a")`, "unhandled fallible expression"}, // the argument may still not be a string
		{`upcase(to_string(.x))`, `fallible argument to "upcase"`},
		{`x = .a + 1`, "unhandled fallible expression"},
		{`"a" ?? "b"`, "unnecessary error coalescing operation"},
		{`x, err = "a"`, "unnecessary error assignment"},
		{`if .x { 1 }`, "non-boolean predicate"},
		{`if "a" { 1 }`, "non-boolean predicate"},
		{`y`, `undefined variable "y"`},
		{"if true { z = 1 }\nz", `2:1: call to undefined variable "z"`}, // block scoping
		{`for_each([1]) -> |_k, v| { w = v }; w`, `undefined variable "w"`},
		{`"hi {{ who }}"`, `undefined variable "who"`},
		{`x = .a; "hi {{ x }}"`, "unhandled fallible expression"},
		{`"{{ a.b }}"`, "invalid template variable"},
		{`upcase(1)`, `invalid argument "value" for "upcase": expected string, got integer`},
		{`split("a")`, `missing required argument "pattern"`},
		{`upcase("a", "b")`, "too many arguments"},
		{`encode_percent("a", ascii_set: "NOPE")`, `invalid argument "ascii_set" for "encode_percent": must be one of`},
		{`s = "QUERY"; encode_percent("a", ascii_set: s)`, `must be one of`},
		{`join(["a"])`, "unhandled fallible expression"},
		{`upcase(val: "a")`, `unknown keyword argument "val"`},
		{`for_each([1])`, "requires a closure"},
		{`for_each([1]) -> |v| { v }`, "takes 2 parameters"},
		{`upcase("a") -> |a, b| { a }`, "does not take a closure"},
		{`exists("a")`, "must be a path"},
		{`1 == 1 == 1`, "can't be chained"},
		{`x = [1]; x[.i]`, "path index must be an integer literal"},
		{`1 = 2`, "invalid assignment target"},
		{`to_int(.x) ?? abort "no x"`, `1:15: syntax error: unexpected identifier "abort"`}, // abort is not an operand
		{`_`, `"_" can only be an assignment target`},
		{`if = 1`, "syntax error"},
		{`return = 1`, "reserved identifier"},
		{`x = string`, "reserved identifier"},
		{`{"a": 1} | [1]`, "only objects can be merged"},
		{`x |= {}`, "not supported"},
		{`%foo`, "not supported"},
		{`.(a|b)`, "not supported"},
		{strings.Repeat("[", 100) + strings.Repeat("]", 100), "nesting exceeds"},
		{strings.Repeat("{ ", 60) + "1" + strings.Repeat(" }", 60), "nesting exceeds"},
		{strings.Repeat("!", 200) + "true", "nesting exceeds"},
		{strings.Repeat("x", MaxSourceLen+1), "more than the"},
	}
	for _, tc := range cases {
		name := tc.src
		if len(name) > 40 {
			name = name[:40]
		}
		t.Run(name, func(t *testing.T) {
			_, err := Compile(tc.src)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want error containing %q", err, tc.want)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error is %T, not *Error", err)
			}
		})
	}
}

func TestRuntimeErrors(t *testing.T) {
	cases := []struct {
		src  string
		ev   any
		want string
	}{
		{`parse_json!(.body)`, map[string]any{"body": "{oops"}, `1:1: function call error for "parse_json": unable to parse json`},
		{`x = 1` + "\n" + `to_int!(.v)`, map[string]any{"v": "abc"}, `2:1: function call error for "to_int"`},
		{`to_string!(.body)`, map[string]any{"body": []any{}}, `function call error for "to_string"`},
		{`parse_json!(.body)`, map[string]any{}, `expected string for argument "value", got null`},
		{`abort`, nil, "1:1: aborted"},
		{`abort "no installation"`, nil, "aborted: no installation"},
		{`if true { abort "inside" }; 1`, nil, "aborted: inside"},
		{`assert!(false, message: "custom")`, nil, "custom"},
		{`assert!(1 > 2)`, nil, "assertion failed"},
		{`to_int("x") ?? { abort "no int" }`, nil, "aborted: no int"},
		{`decode_base64!("!!!")`, nil, "unable to decode value from base64"},
		{`7 / to_int!(.z) ?? assert!(false, "division failed")`, map[string]any{"z": 0}, "division failed"},
	}
	for _, tc := range cases {
		t.Run(tc.src, func(t *testing.T) {
			p, err := Compile(tc.src)
			if err != nil {
				t.Fatalf("compile: %v", err)
			}
			got, err := p.Run(tc.ev)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %#v, %v; want error containing %q", got, err, tc.want)
			}
		})
	}
}

func TestLimits(t *testing.T) {
	cases := []struct{ name, src, want string }{
		// nested loops over a big array: a runaway script
		{"steps", `a = split(encode_base16(sha2("x") + sha2("y") + sha2("z")), "")
n = 0
for_each(a) -> |_i, _v| {
  for_each(a) -> |_j, _w| {
    n = n + 1
  }
}
n`, "step limit"},
		{"string doubling", "x = \"abcdefghijklmnop\"\n" + strings.Repeat("x = x + x\n", 30) + "x", "memory limit"},
		{"string repeat", `"abc" * 100000000000`, "memory limit"},
		{"array index", `x = []; x[100000000] = 1`, "out of range"},
		{"comparisons of big values", `a = split("x" * 1000000, "")
for_each(a) -> |_i, _v| { a == a }`, "memory limit"},
		{"scanning a big string", `s = "x" * 1000000
for_each(split(s, "", limit: 100000)) -> |_i, _v| { contains(s, "y") }`, "memory limit"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Compile(tc.src)
			if err != nil {
				t.Fatalf("compile: %v", err)
			}
			_, err = p.Run(map[string]any{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want error containing %q", err, tc.want)
			}
		})
	}
}

func TestEventValues(t *testing.T) {
	p, err := Compile(`[.i, .f, .u, .m.k, .l[1]]`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Run(map[string]any{"i": 3, "f": float32(0.5), "u": uint8(9), "m": map[string]string{"k": "v"}, "l": []string{"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []any{int64(3), 0.5, int64(9), "v", "b"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v, want %#v", got, want)
	}
	if _, err := p.Run(map[string]any{"x": struct{}{}}); err == nil {
		t.Fatal("unsupported event value accepted")
	}
}

func FuzzCompileRun(f *testing.F) {
	entries, _ := os.ReadDir("testdata")
	for _, e := range entries {
		b, err := os.ReadFile("testdata/" + e.Name())
		if err == nil {
			f.Add(string(b), pageBody)
		}
	}
	for _, s := range []string{`.a.b[0] = 1; .`, `x, err = parse_json(.body); x`, `"{{ a }}"`, `for_each([1]) -> |k, v| { k }`, `s'x'`, `1 ?? 2`, `.[0]`} {
		f.Add(s, `{"a":[1,2]}`)
	}
	f.Fuzz(func(t *testing.T, src, body string) {
		p, err := Compile(src)
		if err != nil {
			return
		}
		ev := map[string]any{"body": body, "query": body, "path": "/", "headers": map[string]any{"x-hub-signature-256": body}}
		if _, err := p.Run(ev); err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %T is not *Error: %v", err, err)
			}
			if strings.Contains(e.Msg, "internal error") {
				t.Fatalf("panic: %v", err)
			}
		}
	})
}

func TestConcurrentRun(t *testing.T) {
	p, err := Compile(fixture(t, "whatsapp_extract.vrl"))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	for i := 0; i < 8; i++ {
		go func() {
			for j := 0; j < 50; j++ {
				got, err := p.Run(webhook("GET", "code=abc&state=wh_42", "", nil))
				if err == nil && got != "wh_42" {
					err = errors.New("wrong result")
				}
				if err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	for i := 0; i < 8; i++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}
