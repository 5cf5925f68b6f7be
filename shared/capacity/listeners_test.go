package capacity

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

// TestListenerModel: the listener model's arithmetic at the sizes
// docs/deploy.md quotes, by item, from the price table: a listener on the
// Lambda tier is a 256 MB invocation held the whole month plus four
// inbox reads a second; the container tier is its load balancer, its
// tasks and one poll per task.
func TestListenerModel(t *testing.T) {
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 0.01*math.Max(1, math.Abs(want)) {
			t.Errorf("%s: %.2f, want %.2f", what, got, want)
		}
	}
	pr := OnDemand
	month := float64(secondsPerMonth)

	e := ModelListeners(ListenerLoad{Listeners: 1000}, DefaultTiers, pr)
	near("Lambda duration, 1,000 listeners", e.Lambda.Items["Lambda duration"], 1000*0.25*month*pr.LambdaGBSecond)
	near("Lambda polls, 1,000 listeners", e.Lambda.Items["DynamoDB polls"], 1000*4*0.5*month*pr.DynamoReadMillion/1e6)
	near("container tasks, 1,000 listeners", e.Container.Items["Fargate tasks"], 2*(0.5*pr.FargateVCPUHour+2*pr.FargateGBHour)*720)
	near("ALB, 1,000 listeners", e.Container.Items["load balancer hours"]+e.Container.Items["load balancer capacity units"], (pr.ALBHour+1000.0/3000*pr.ALBLCUHour)*720)
	// The limits: each invocation (every 895 s) opens and ends its
	// stream's slots in 3 scope items, the installation's naming 1,000
	// holders (17 KB); each environment writes its heartbeat a minute.
	near("Lambda limits, 1,000 listeners", e.Lambda.Items["DynamoDB limits"], (1000.0/895*(2*(2+17)+(2+17))+1000.0/60)*month*pr.DynamoWriteMillion/1e6)
	if e.Lambda.Ceiling != 1000 || e.Container.Ceiling != 200000 || e.ContainerNLB.Ceiling != 200000 {
		t.Errorf("ceilings: lambda %.0f, container %.0f", e.Lambda.Ceiling, e.Container.Ceiling)
	}

	e = ModelListeners(ListenerLoad{Listeners: 100000}, DefaultTiers, pr)
	if lcu, dim := ALBLCUs(e.Load, DefaultTiers); dim != "active connections" || math.Abs(lcu-100000.0/3000) > 1e-9 {
		t.Errorf("ALB at 100,000 idle listeners: %.1f LCU by %s, want 33.3 by active connections", lcu, dim)
	}
	near("container tasks, 100,000 listeners", e.Container.Items["Fargate tasks"], 10*(0.5*pr.FargateVCPUHour+2*pr.FargateGBHour)*720)
	// Idle listeners write nothing for the limits: each task its heartbeat.
	near("container limits, 100,000 listeners", e.Container.Items["DynamoDB limits"], 10.0/60*month*pr.DynamoWriteMillion/1e6)
	// Idle tasks poll every 250 ms (shared/taskrelay's idle poll).
	near("container polls, 100,000 idle listeners", e.Container.Items["DynamoDB polls"], 10*4*0.5*month*pr.DynamoReadMillion/1e6)
	// With signals flowing (a signal a second per task on average) a task
	// is hot almost all the time: one poll per 25 ms.
	busy := ModelListeners(ListenerLoad{Listeners: 100000, SignalsPerSecond: 10}, DefaultTiers, pr)
	hot := 1 - math.Exp(-1*120.0)
	near("container polls, 100,000 listeners, 10 signals/s", busy.Container.Items["DynamoDB polls"], 10*(hot*40+(1-hot)*4)*0.5*month*pr.DynamoReadMillion/1e6)
	// Cheaper per listener by three orders of magnitude; the crossover is
	// a handful of listeners (the container tier's floor is about $80).
	if e.ContainerPerThousand*100 > e.LambdaPerThousand {
		t.Errorf("per 1,000 idle listeners: container $%.2f, lambda $%.2f", e.ContainerPerThousand, e.LambdaPerThousand)
	}
	if e.Crossover < 1 || e.Crossover > 20 {
		t.Errorf("crossover at %.0f listeners", e.Crossover)
	}
	// A listener churn makes registrations and new connections.
	churn := ModelListeners(ListenerLoad{Listeners: 100000, Session: 1800e9}, DefaultTiers, pr)
	if churn.Container.Items["DynamoDB registrations"] <= e.Container.Items["DynamoDB registrations"] {
		t.Error("sessions of 30 minutes cost no more registrations than listeners that stay")
	}
	near("container limits, 100,000 listeners of 30 minutes", churn.Container.Items["DynamoDB limits"], (100000.0/1800*(2*3+3)+10.0/60)*month*pr.DynamoWriteMillion/1e6)

	// Behind the NLB: the tasks as behind the ALB; the load balancer's
	// units by processed bytes (an idle stream's 7.6 bytes a second, and
	// for each of its 0.37 writes a second a TLS record and the packets'
	// headers both ways: 53.8 bytes a second), not by active connections
	// (one NLCU holds 100,000). The goal: under $300 a month.
	lcu, dim := NLBLCUs(e.Load, DefaultTiers)
	perStream := 21.0/3 + 18.0/30 + (1.0/3+1.0/30)*(22+2*52)
	if dim != "processed bytes" || math.Abs(lcu-100000*perStream*3600/1e9) > 1e-9 {
		t.Errorf("NLB at 100,000 idle listeners: %.2f NLCU by %s, want %.2f by processed bytes", lcu, dim, 100000*perStream*3600/1e9)
	}
	near("NLB, 100,000 listeners", e.ContainerNLB.Items["load balancer hours"]+e.ContainerNLB.Items["load balancer capacity units"], (pr.NLBHour+lcu*pr.NLCUHour)*720)
	near("container tasks behind the NLB, 100,000 listeners", e.ContainerNLB.Items["Fargate tasks"], e.Container.Items["Fargate tasks"])
	if e.ContainerNLB.Total >= 300 || e.Container.Total-e.ContainerNLB.Total < 100 {
		t.Errorf("100,000 idle listeners: NLB $%.2f, ALB $%.2f a month; want the NLB under $300", e.ContainerNLB.Total, e.Container.Total)
	}
	if e.CrossoverNLB < 1 || e.CrossoverNLB > 20 {
		t.Errorf("crossover behind the NLB at %.0f listeners", e.CrossoverNLB)
	}

	var out bytes.Buffer
	e.Print(&out)
	for _, want := range []string{"per 1,000 listeners", "THE LOAD IS PAST IT", "Crossover (ALB)", "Crossover (NLB)", "CONTAINER, NLB", "NLCU", "checked 2026-11-28"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
