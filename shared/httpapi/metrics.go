package httpapi

import (
	"os"

	"github.com/botforge/platform/shared/metrics"
	"github.com/botforge/platform/shared/platform"
)

// The console's health page (docs/metrics.md): the platform's metrics over
// the last hour or day, from the in-process series of the local platform
// (Config.Series). On AWS no process sees the whole platform: the answer
// says the series are not kept here and names the CloudWatch dashboard
// (PLATFORM_DASHBOARD_URL), which the page links to.

// EnvDashboardURL names the variable holding the CloudWatch dashboard's URL.
const EnvDashboardURL = "PLATFORM_DASHBOARD_URL"

func (s *server) metricsRoutes() []route {
	return []route{
		// Platform-wide aggregates: any signed-in account.
		{pattern: "GET /v1/admin/metrics", op: "getPlatformMetrics", scope: scopeAccount, handle: s.getPlatformMetrics},
		// A bot's messages and LLM tokens: its workspace's members.
		{pattern: "GET /v1/admin/bots/{id}/metrics", op: "getBotMetrics", scope: scopeWorkspace, role: platform.RoleViewer, handle: s.getBotMetrics},
	}
}

type metricsAnswer struct {
	Available    bool   `json:"available"`
	DashboardURL string `json:"dashboardUrl,omitempty"`
	*metrics.Answer
}

func (s *server) metricsWindow(c *call) (string, error) {
	w, err := c.query().str("window")
	if err != nil {
		return "", err
	}
	switch w {
	case "":
		return "hour", nil
	case "hour", "day":
		return w, nil
	}
	return "", platform.Invalid("query parameter \"window\" must be hour or day")
}

func (s *server) answerMetrics(c *call, bot string) (any, error) {
	w, err := s.metricsWindow(c)
	if err != nil {
		return nil, err
	}
	out := metricsAnswer{DashboardURL: os.Getenv(EnvDashboardURL)}
	if s.Series != nil {
		a := s.Series.Read(w, bot)
		out.Available, out.Answer = true, &a
	}
	return out, nil
}

func (s *server) getPlatformMetrics(c *call) (any, error) { return s.answerMetrics(c, "") }

func (s *server) getBotMetrics(c *call) (any, error) {
	b, err := s.botOfWorkspace(c, c.PathValue("id"))
	if err != nil {
		return nil, err
	}
	return s.answerMetrics(c, b.ID)
}
