package webchat

import (
	"strings"
	"testing"
)

// TestPageCSPAllowsTheUploadOrigin: the hosted page's connect-src names the
// origin of the presigned upload URLs when it is another than the page's
// (on AWS the bucket's S3 host; on aws-local the function's S3 endpoint),
// and never anything that could end the directive.
func TestPageCSPAllowsTheUploadOrigin(t *testing.T) {
	const self = "https://abc.lambda-url.us-east-1.on.aws"
	for _, tc := range []struct{ files, want string }{
		{"https://platform-files-1.s3.us-east-1.amazonaws.com", "connect-src 'self' https://platform-files-1.s3.us-east-1.amazonaws.com;"},
		{"http://127.0.0.1:40123", "connect-src 'self' http://127.0.0.1:40123;"},
		{"http://[::1]:40123", "connect-src 'self' http://[::1]:40123;"},
		{self, "connect-src 'self';"},
		{"HTTPS://ABC.lambda-url.us-east-1.on.aws", "connect-src 'self';"},
		{"", "connect-src 'self';"},
		{"https://x.example; script-src *", "connect-src 'self';"},
		{"https://x.example 'unsafe-eval'", "connect-src 'self';"},
		{"javascript://x", "connect-src 'self';"},
	} {
		csp := pageCSP(uploadSource(tc.files, self))
		if !strings.Contains(csp, tc.want) || strings.Count(csp, "connect-src") != 1 {
			t.Errorf("files origin %q: CSP %q, want %q", tc.files, csp, tc.want)
		}
	}
}
