package functions_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/httpapi"
)

// TestSampleEvents runs each sample API Gateway event of events/ through the
// Lambda adapter of its function, as `sam local invoke` would, in-process
// against the embedded stand-ins.
func TestSampleEvents(t *testing.T) {
	e := apitest.New(t)
	for _, tc := range []struct {
		area       httpapi.Area
		wantStatus int
		wantBody   string
	}{
		{httpapi.AreaAdmin, 200, `"email":"admin@localhost"`},
		// Operations of these areas are not implemented yet: the route table answers 404.
		{httpapi.AreaChat, 404, `"type":"ResourceNotFound"`},
		{httpapi.AreaTables, 404, `"type":"ResourceNotFound"`},
		{httpapi.AreaFiles, 404, `"type":"ResourceNotFound"`},
	} {
		t.Run(string(tc.area), func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("..", "events", string(tc.area)+"-request.json"))
			if err != nil {
				t.Fatal(err)
			}
			var ev events.APIGatewayV2HTTPRequest
			if err := json.Unmarshal([]byte(strings.ReplaceAll(string(raw), "<TOKEN>", e.AdminToken)), &ev); err != nil {
				t.Fatal(err)
			}
			h := httpapi.New(httpapi.Config{Store: e.Platform.Store, PagingKey: []byte("0123456789abcdef")}, tc.area)
			res, err := httpadapter.NewV2(h).ProxyWithContext(context.Background(), ev)
			if err != nil {
				t.Fatal(err)
			}
			if res.StatusCode != tc.wantStatus || !strings.Contains(res.Body, tc.wantBody) {
				t.Fatalf("got %d %s", res.StatusCode, res.Body)
			}
		})
	}
}
