package metricse2e

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func httptestServer(t *testing.T, h http.Handler) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}
