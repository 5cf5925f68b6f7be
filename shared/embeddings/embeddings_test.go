package embeddings

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestFromEnv(t *testing.T) {
	secret := func(name string) (string, error) {
		if name == "/stack/key" {
			return "from-ssm", nil
		}
		return "", errors.New("AccessDenied")
	}
	for _, tc := range []struct {
		name    string
		env     map[string]string
		secret  func(string) (string, error)
		ok      bool
		want    Config
		wantErr string
	}{
		{name: "no model: lexical search", env: map[string]string{EnvURL: "http://x/v1"}},
		{name: "own endpoint", env: map[string]string{EnvModel: "m", EnvURL: "http://e:1/v1/", EnvAPIKey: "k", envLLMURL: "http://llm/v1", envLLMAPIKey: "lk"},
			ok: true, want: Config{Model: "m", URL: "http://e:1/v1", APIKey: "k", Timeout: DefaultTimeout}},
		{name: "the LLM provider's endpoint and key", env: map[string]string{EnvModel: "m", envLLMURL: "http://llm/v1", envLLMAPIKey: "lk", EnvTimeout: "5s"},
			ok: true, want: Config{Model: "m", URL: "http://llm/v1", APIKey: "lk", Timeout: 5 * time.Second}},
		{name: "key from SSM", env: map[string]string{EnvModel: "m", EnvURL: "https://e/v1", EnvAPIKeyParameter: "/stack/key"}, secret: secret,
			ok: true, want: Config{Model: "m", URL: "https://e/v1", APIKey: "from-ssm", Timeout: DefaultTimeout}},
		{name: "SSM refused", env: map[string]string{EnvModel: "m", EnvURL: "https://e/v1", EnvAPIKeyParameter: "/other/key"}, secret: secret, wantErr: "AccessDenied"},
		{name: "parameter without AWS", env: map[string]string{EnvModel: "m", EnvURL: "https://e/v1", EnvAPIKeyParameter: "/stack/key"}, wantErr: "on AWS only"},
		{name: "no endpoint", env: map[string]string{EnvModel: "m"}, wantErr: "PLATFORM_EMBEDDINGS_URL"},
		{name: "bad url", env: map[string]string{EnvModel: "m", EnvURL: "ftp://x"}, wantErr: "not an http(s) URL"},
		{name: "bad timeout", env: map[string]string{EnvModel: "m", EnvURL: "http://x/v1", EnvTimeout: "soon"}, wantErr: EnvTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ok, err := FromEnv(func(k string) string { return tc.env[k] }, tc.secret)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one naming %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || ok != tc.ok || (ok && c != tc.want) {
				t.Fatalf("got %+v %v %v, want %+v %v", c, ok, err, tc.want, tc.ok)
			}
		})
	}
}
