package logstore

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/botforge/platform/shared/platform"
)

// BenchmarkLocalWriteTwoFiles: one Write of a call's two lines, its bot's
// and its integration's (two files, two fsyncs), as every call the
// platform logs; reports the p50 and p90 of a Write.
//
//	go test -run '^$' -bench BenchmarkLocalWriteTwoFiles -benchtime 200x ./shared/logstore
func BenchmarkLocalWriteTwoFiles(b *testing.B) {
	s, err := OpenLocal(b.TempDir(), LocalOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var took []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		now := time.Now()
		t0 := time.Now()
		if err := s.Write(context.Background(),
			platform.LogLine{ID: fmt.Sprintf("log_01HZZZZZZZZZZZZZZZ%06d", i), Time: now, Level: "info", Message: "to the bot", Source: botSrc},
			platform.LogLine{ID: fmt.Sprintf("log_01HZZZZZZZZZZZZZZY%06d", i), Time: now, Level: "info", Message: "to the integration", Source: platform.LogSource{Kind: platform.LogIntegration, ID: testInt}}); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(t0))
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(took[len(took)*9/10].Microseconds())/1000, "p90-ms")
}
