package capacity

import (
	"fmt"
	"io"
	"math"
	"text/tabwriter"
	"time"
)

// The listener model (docs/deploy.md "Stream tiers"): what open Chat API
// streams (listenConversation, the webchat's /initialize) cost and how
// many each stream tier holds. Unlike the message model it replays
// nothing: a stream's cost is time held, reads polled and registrations
// written, each known from the code (shared/chatrelay, shared/taskrelay)
// and the bench (scripts/streambench), and stated in Tiers.

// ListenerLoad is the streams to model.
type ListenerLoad struct {
	// Listeners is the streams open at once.
	Listeners float64
	// SignalsPerSecond is the signals delivered to streams, platform-wide
	// (a message, a typing indicator, each once per conversation).
	SignalsPerSecond float64
	// Session is how long a listener stays before it leaves (a new one
	// takes its place): each session registers its conversation and
	// deletes the registration. Zero: listeners stay (idle visitors with
	// the chat open around the clock), only the Lambda tier's invocations
	// end and start again.
	Session time.Duration
}

// Tiers are the two stream tiers' settings and what the bench measured.
type Tiers struct {
	// Lambda tier (ChatStreamFunction): the function's memory, how long
	// one invocation holds its stream (the timeout less chatrelay.Margin),
	// the relay's poll, and the concurrency the streams may take (the
	// account's regional concurrency, or the function's reserved
	// concurrency when the stack sets one).
	LambdaMemoryMB     float64
	LambdaStream       time.Duration
	LambdaPoll         time.Duration
	LambdaConcurrency  float64
	LambdaTopicsPerRun float64 // LISTEN items an invocation writes and deletes (its conversation, its installation)

	// Container tier (StreamTier=container): one task's size, the streams
	// it holds (scripts/streambench), the tasks kept at least (one per
	// availability zone) and at most (the service's autoscaling maximum),
	// the task's inbox poll and registration lease (shared/taskrelay).
	TaskVCPU, TaskMemoryGB float64
	StreamsPerTask         float64
	MinTasks, MaxTasks     float64
	// TaskPoll is the task's inbox poll while idle, TaskPollFast while
	// signals flow (for TaskHotFor after one, shared/taskrelay).
	TaskPoll, Lease time.Duration
	TaskPollFast    time.Duration
	TaskHotFor      time.Duration
	// IdleBytesPerSecond is what an idle stream sends (keep-alive comments
	// every chatapi.KeepAlive, pings every chatapi.PingEvery, with chunked
	// encoding's framing): the ALB's processed bytes.
	IdleBytesPerSecond float64
	// SignalBytes is one signal's frame on a stream.
	SignalBytes float64
	// ALBTargetsMax is the load balancer's quota of targets (1,000 per
	// ALB): the tasks one ALB can front. NLBTargetsMax: the NLB's (500 per
	// availability zone, two zones).
	ALBTargetsMax, NLBTargetsMax float64
	// Behind the NLB the tasks end TLS and the NLB counts TCP/IP headers
	// in its processed bytes: each write of a stream is a TLS record
	// (TLSRecordBytes more) in a packet, and the client acknowledges it
	// with a packet of headers (PacketHeaderBytes each: IPv4, TCP with
	// timestamps). IdleWritesPerSecond: an idle stream's writes (a
	// keep-alive comment every 3 s, a ping every 30 s).
	TLSRecordBytes, PacketHeaderBytes, IdleWritesPerSecond float64

	// FanoutMillis and FanoutMemoryMB: the fan-out function's invocation
	// per signal (one record per batch at worst).
	FanoutMillis, FanoutMemoryMB float64

	// The limits held across the platform (shared/dynamo Limiter): a
	// stream holds a slot in LimitScopes scope items (its key, its
	// address, its installation); each item counts its holders (a process,
	// on the Lambda tier an execution environment) in HolderBytes each;
	// a process holding slots writes its heartbeat every LimitHeartbeat.
	LimitScopes    float64
	HolderBytes    float64
	LimitHeartbeat time.Duration
}

// DefaultTiers are template.yaml's settings and the bench's numbers
// (2 shared cores; docs/deploy.md).
var DefaultTiers = Tiers{
	LambdaMemoryMB: 256, LambdaStream: 895 * time.Second, LambdaPoll: 250 * time.Millisecond,
	LambdaConcurrency: 1000, LambdaTopicsPerRun: 2,
	// template.yaml's task: 0.5 vCPU / 2 GB. scripts/streambench, 10,000
	// idle streams in one process: RSS about 1 GB, CPU a quarter of a core;
	// with TLS ended by the task (-tls, behind the NLB) 1.2 GB and no
	// measurably higher idle CPU, so the same size serves both.
	TaskVCPU: 0.5, TaskMemoryGB: 2, StreamsPerTask: 10000, MinTasks: 2, MaxTasks: 20,
	TaskPoll: 250 * time.Millisecond, TaskPollFast: 25 * time.Millisecond, TaskHotFor: 2 * time.Minute, Lease: 12 * time.Hour,
	// ": keep-alive\n\n" (14 bytes + 7 of chunk framing) every 3 s,
	// "data: ping\n\n" (12 + 6) every 30 s.
	IdleBytesPerSecond: 21.0/3 + 18.0/30,
	SignalBytes:        600,
	ALBTargetsMax:      1000,
	NLBTargetsMax:      1000,
	// TLS 1.3 with AES-GCM: a 5-byte header, the content type and a 16-byte
	// tag; 20 bytes of IPv4, 20 of TCP, 12 of the timestamps option.
	TLSRecordBytes: 22, PacketHeaderBytes: 52, IdleWritesPerSecond: 1.0/3 + 1.0/30,
	FanoutMillis: 30, FanoutMemoryMB: 256,
	// "h_" + a 13-character holder id, and its count.
	LimitScopes: 3, HolderBytes: 17, LimitHeartbeat: time.Minute,
}

// limitsCost is what the limits' table writes cost a month: opensPerSecond
// streams opened (and as many ended), holders processes holding slots
// (each writing its heartbeat every period), and the installation's scope
// item naming them all (the listeners are of one installation, the worst
// case: an item's write costs a unit per KB begun, twice in the open's
// transaction). The key's and the address's items name a holder or few.
func limitsCost(opensPerSecond, holders float64, t Tiers, pr Prices) float64 {
	// An item holds 400 KB at most: about 24,000 holders (past them an
	// open is refused; docs/chat-api.md "Limits").
	instUnits := math.Min(400, math.Ceil((100+holders*t.HolderBytes)/1024))
	open := 2 * (t.LimitScopes - 1 + instUnits) // TransactWriteItems
	end := t.LimitScopes - 1 + instUnits        // an UpdateItem per scope
	beats := holders / t.LimitHeartbeat.Seconds()
	perSecond := opensPerSecond*(open+end) + beats
	return perSecond * secondsPerMonth * pr.DynamoWriteMillion / 1e6
}

// TierCost is one tier's monthly cost by item, and its ceiling.
type TierCost struct {
	Name  string
	Items map[string]float64 // per month
	Total float64
	// Ceiling is the listeners the tier holds at most, and what bounds it.
	Ceiling  float64
	Bound    string
	Detail   string // tasks, LCUs, concurrency at the load
	Refusals string // what a listener past the ceiling gets
}

// ListenerEstimate is the listener model of a load.
type ListenerEstimate struct {
	Load              ListenerLoad
	Tiers             Tiers
	Prices            Prices
	Lambda, Container TierCost
	// ContainerNLB: the container tier behind a Network Load Balancer.
	ContainerNLB TierCost
	// PerThousandIdle is each tier's monthly cost per 1,000 idle
	// listeners at the load's size (its total / listeners * 1,000).
	LambdaPerThousand, ContainerPerThousand, ContainerNLBPerThousand float64
	// Crossover is the listeners from which the container tier costs less
	// (with the load's signals and sessions); 0 when it always does.
	// CrossoverNLB: the same behind the NLB.
	Crossover, CrossoverNLB float64
}

const hoursPerMonth = secondsPerMonth / 3600.0

// signalCost is what the signals cost on either tier: the signal's write,
// the fan-out's reads, one inbox write per holder, the fan-out function.
func signalCost(l ListenerLoad, t Tiers, pr Prices, holders float64) (dynamo, lambda float64) {
	perSecondWrite := l.SignalsPerSecond * (1 + holders) // signal + inbox items
	perSecondRead := l.SignalsPerSecond * (1 + 0.5)      // consistent GetItem, LISTEN Query
	dynamo = (perSecondWrite*pr.DynamoWriteMillion + perSecondRead*pr.DynamoReadMillion) * secondsPerMonth / 1e6
	gbs := l.SignalsPerSecond * t.FanoutMillis / 1000 * t.FanoutMemoryMB / 1024
	lambda = (gbs*pr.LambdaGBSecond + l.SignalsPerSecond*pr.LambdaRequestMillion/1e6) * secondsPerMonth
	return dynamo, lambda
}

// LambdaTier is the cost of l on the Lambda tier.
func LambdaTier(l ListenerLoad, t Tiers, pr Prices) TierCost {
	c := TierCost{Name: "lambda", Items: map[string]float64{}}
	// Each listener holds an invocation for its whole life; invocations
	// end every LambdaStream (the client opens another) or with the
	// session, whichever comes first.
	life := t.LambdaStream.Seconds()
	if l.Session > 0 && l.Session.Seconds() < life {
		life = l.Session.Seconds()
	}
	runsPerSecond := l.Listeners / life
	c.Items["Lambda duration"] = l.Listeners * t.LambdaMemoryMB / 1024 * secondsPerMonth * pr.LambdaGBSecond
	c.Items["Lambda requests"] = runsPerSecond * secondsPerMonth * pr.LambdaRequestMillion / 1e6
	polls := l.Listeners / t.LambdaPoll.Seconds() * 0.5 // eventually consistent Query, under 4 KB
	regs := runsPerSecond * t.LambdaTopicsPerRun * 2    // put and delete
	c.Items["DynamoDB polls"] = polls * secondsPerMonth * pr.DynamoReadMillion / 1e6
	c.Items["DynamoDB registrations"] = regs * secondsPerMonth * pr.DynamoWriteMillion / 1e6
	// Each invocation takes its stream's slots and gives them back; each
	// execution environment holding one is a holder with its heartbeat.
	c.Items["DynamoDB limits"] = limitsCost(runsPerSecond, l.Listeners, t, pr)
	sd, sl := signalCost(l, t, pr, 1)
	c.Items["signals (DynamoDB, fan-out)"] = sd + sl
	c.Ceiling, c.Bound = t.LambdaConcurrency, "Lambda concurrency (the account's regional limit, or the stream function's reserved concurrency)"
	c.Detail = fmt.Sprintf("%.0f concurrent invocations of %.0f MB; %.1f new invocations/s", l.Listeners, t.LambdaMemoryMB, runsPerSecond)
	c.Refusals = "throttled invocations: the function URL answers 429 (with reserved concurrency the API functions keep theirs)"
	for _, v := range c.Items {
		c.Total += v
	}
	return c
}

// Tasks is how many tasks hold l listeners.
func (t Tiers) Tasks(listeners float64) float64 {
	return math.Max(t.MinTasks, math.Ceil(listeners/t.StreamsPerTask))
}

// ALBLCUs is the load balancer's capacity units at the load: the
// largest of its dimensions.
func ALBLCUs(l ListenerLoad, t Tiers) (lcu float64, dimension string) {
	newConn := l.SignalsPerSecond // the API call behind each signal, at worst on a connection of its own
	if l.Session > 0 {
		newConn += l.Listeners / l.Session.Seconds()
	}
	gbPerHour := (l.Listeners*t.IdleBytesPerSecond + l.SignalsPerSecond*t.SignalBytes) * 3600 / 1e9
	dims := []struct {
		name string
		v    float64
	}{
		{"new connections", newConn / ALBLCU.NewConnectionsPerSecond},
		{"active connections", l.Listeners / ALBLCU.ActiveConnectionsPerMinute},
		{"processed bytes", gbPerHour / ALBLCU.ProcessedGBPerHour},
		{"rule evaluations", 0}, // one rule (the default action): the first 10 are free
	}
	for _, d := range dims {
		if d.v > lcu {
			lcu, dimension = d.v, d.name
		}
	}
	return lcu, dimension
}

// NLBLCUs is the Network Load Balancer's capacity units at the load (TCP
// passed through): the largest of its dimensions. Its processed bytes
// count the TLS records and the TCP/IP headers both ways (the tasks end
// TLS), several times what the streams write.
func NLBLCUs(l ListenerLoad, t Tiers) (lcu float64, dimension string) {
	newConn := l.SignalsPerSecond
	if l.Session > 0 {
		newConn += l.Listeners / l.Session.Seconds()
	}
	perWrite := t.TLSRecordBytes + 2*t.PacketHeaderBytes
	idle := t.IdleBytesPerSecond + t.IdleWritesPerSecond*perWrite
	gbPerHour := (l.Listeners*idle + l.SignalsPerSecond*(t.SignalBytes+perWrite)) * 3600 / 1e9
	dims := []struct {
		name string
		v    float64
	}{
		{"new connections", newConn / NLBLCU.NewConnectionsPerSecond},
		{"active connections", l.Listeners / NLBLCU.ActiveConnections},
		{"processed bytes", gbPerHour / NLBLCU.ProcessedGBPerHour},
	}
	for _, d := range dims {
		if d.v > lcu {
			lcu, dimension = d.v, d.name
		}
	}
	return lcu, dimension
}

// ContainerTier is the cost of l on the container tier behind an
// Application Load Balancer (StreamLoadBalancerType alb).
func ContainerTier(l ListenerLoad, t Tiers, pr Prices) TierCost {
	return containerTier(l, t, pr, false)
}

// ContainerTierNLB is the cost of l on the container tier behind a
// Network Load Balancer (StreamLoadBalancerType nlb).
func ContainerTierNLB(l ListenerLoad, t Tiers, pr Prices) TierCost {
	return containerTier(l, t, pr, true)
}

func containerTier(l ListenerLoad, t Tiers, pr Prices, nlb bool) TierCost {
	c := TierCost{Name: "container (ALB)", Items: map[string]float64{}}
	tasks := t.Tasks(l.Listeners)
	c.Items["Fargate tasks"] = tasks * (t.TaskVCPU*pr.FargateVCPUHour + t.TaskMemoryGB*pr.FargateGBHour) * hoursPerMonth
	lcu, dim := ALBLCUs(l, t)
	lbName, lcuName, targetsMax := "ALB", "LCU", t.ALBTargetsMax
	if nlb {
		c.Name = "container (NLB)"
		lcu, dim = NLBLCUs(l, t)
		lbName, lcuName, targetsMax = "NLB", "NLCU", t.NLBTargetsMax
		c.Items["load balancer hours"] = pr.NLBHour * hoursPerMonth
		c.Items["load balancer capacity units"] = lcu * pr.NLCUHour * hoursPerMonth
	} else {
		c.Items["load balancer hours"] = pr.ALBHour * hoursPerMonth
		c.Items["load balancer capacity units"] = lcu * pr.ALBLCUHour * hoursPerMonth
	}
	// A task polls fast while a signal came within TaskHotFor (signals
	// spread evenly over the tasks, arriving at random: the share of time
	// hot is 1-e^(-rate*HotFor)), at TaskPoll otherwise.
	hot := 0.0
	if t.TaskPollFast > 0 && l.SignalsPerSecond > 0 {
		hot = 1 - math.Exp(-l.SignalsPerSecond/tasks*t.TaskHotFor.Seconds())
	}
	perTask := (1 - hot) / t.TaskPoll.Seconds()
	if hot > 0 {
		perTask += hot / t.TaskPollFast.Seconds()
	}
	polls := tasks * perTask * 0.5 // eventually consistent Query, under 4 KB
	c.Items["DynamoDB polls"] = polls * secondsPerMonth * pr.DynamoReadMillion / 1e6
	// One LISTEN item per conversation per task: written again twice per
	// lease while listened to; a session registers and deletes its own.
	regs := l.Listeners / (t.Lease.Seconds() / 2)
	if l.Session > 0 {
		regs += l.Listeners / l.Session.Seconds() * 2
	}
	c.Items["DynamoDB registrations"] = regs * secondsPerMonth * pr.DynamoWriteMillion / 1e6
	// A listener takes its slots when it comes and gives them back when
	// it leaves; while it stays it writes nothing: each task writes its
	// heartbeat.
	opens := 0.0
	if l.Session > 0 {
		opens = l.Listeners / l.Session.Seconds()
	}
	c.Items["DynamoDB limits"] = limitsCost(opens, tasks, t, pr)
	sd, sl := signalCost(l, t, pr, 1)
	c.Items["signals (DynamoDB, fan-out)"] = sd + sl
	maxTasks := math.Min(t.MaxTasks, targetsMax)
	c.Ceiling = maxTasks * t.StreamsPerTask
	c.Bound = fmt.Sprintf("%.0f tasks (the service's maximum; an %s fronts at most %.0f) x %.0f streams per task", maxTasks, lbName, targetsMax, t.StreamsPerTask)
	c.Detail = fmt.Sprintf("%.0f tasks of %.2g vCPU / %.2g GB; %s %.1f %s (by %s)", tasks, t.TaskVCPU, t.TaskMemoryGB, lbName, lcu, lcuName, dim)
	c.Refusals = "tasks at their limit answer new streams 503 until the service scales out (minutes); the API is not involved"
	for _, v := range c.Items {
		c.Total += v
	}
	return c
}

// ModelListeners estimates both tiers for l.
func ModelListeners(l ListenerLoad, t Tiers, pr Prices) ListenerEstimate {
	e := ListenerEstimate{Load: l, Tiers: t, Prices: pr, Lambda: LambdaTier(l, t, pr), Container: ContainerTier(l, t, pr),
		ContainerNLB: ContainerTierNLB(l, t, pr)}
	if l.Listeners > 0 {
		e.LambdaPerThousand = e.Lambda.Total / l.Listeners * 1000
		e.ContainerPerThousand = e.Container.Total / l.Listeners * 1000
		e.ContainerNLBPerThousand = e.ContainerNLB.Total / l.Listeners * 1000
	}
	e.Crossover = crossover(l, t, pr, ContainerTier)
	e.CrossoverNLB = crossover(l, t, pr, ContainerTierNLB)
	return e
}

// Crossover is the fewest listeners (with l's signals and sessions) at
// which the container tier costs no more than the Lambda tier; 0 when it
// never costs more. The Lambda tier grows by a listener's invocation, the
// container tier by steps of a task and has a floor (its load balancer,
// its minimum tasks): the first listener count where the container is
// cheaper is found by bisection over whole listeners.
func Crossover(l ListenerLoad, t Tiers, pr Prices) float64 {
	return crossover(l, t, pr, ContainerTier)
}

func crossover(l ListenerLoad, t Tiers, pr Prices, container func(ListenerLoad, Tiers, Prices) TierCost) float64 {
	cheaper := func(n float64) bool {
		m := l
		m.Listeners = n
		return container(m, t, pr).Total <= LambdaTier(m, t, pr).Total
	}
	if cheaper(0) {
		return 0
	}
	lo, hi := 0.0, 1.0
	for !cheaper(hi) {
		lo, hi = hi, hi*2
		if hi > 1e9 {
			return math.Inf(1)
		}
	}
	for hi-lo > 1 {
		mid := math.Floor((lo + hi) / 2)
		if cheaper(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// Print writes the estimate as text.
func (e ListenerEstimate) Print(w io.Writer) {
	l := e.Load
	session := "listeners stay (idle, connected around the clock)"
	if l.Session > 0 {
		session = "each listener stays " + l.Session.String()
	}
	fmt.Fprintf(w, "Listeners: %.0f open streams, %.1f signals/s, %s\n\n", l.Listeners, l.SignalsPerSecond, session)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "MONTHLY (USD)\tLAMBDA TIER\tCONTAINER, ALB\tCONTAINER, NLB\t")
	for _, k := range []string{"Lambda duration", "Lambda requests", "Fargate tasks", "load balancer hours", "load balancer capacity units", "DynamoDB polls", "DynamoDB registrations", "DynamoDB limits", "signals (DynamoDB, fan-out)"} {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", k, money(e.Lambda.Items, k), money(e.Container.Items, k), money(e.ContainerNLB.Items, k))
	}
	fmt.Fprintf(tw, "total\t%.2f\t%.2f\t%.2f\t\n", e.Lambda.Total, e.Container.Total, e.ContainerNLB.Total)
	fmt.Fprintf(tw, "per 1,000 listeners\t%.2f\t%.2f\t%.2f\t\n", e.LambdaPerThousand, e.ContainerPerThousand, e.ContainerNLBPerThousand)
	tw.Flush()
	fmt.Fprintln(w)
	for _, c := range []TierCost{e.Lambda, e.Container, e.ContainerNLB} {
		fmt.Fprintf(w, "%s tier: %s\n", c.Name, c.Detail)
		over := ""
		if l.Listeners > c.Ceiling {
			over = fmt.Sprintf(" -- THE LOAD IS PAST IT: %s", c.Refusals)
		}
		fmt.Fprintf(w, "  ceiling: %.0f listeners (%s)%s\n", c.Ceiling, c.Bound, over)
	}
	fmt.Fprintln(w)
	for _, x := range []struct {
		lb string
		n  float64
	}{{"ALB", e.Crossover}, {"NLB", e.CrossoverNLB}} {
		switch {
		case x.n == 0:
			fmt.Fprintf(w, "Crossover (%s): the container tier costs less at any number of listeners\n", x.lb)
		case math.IsInf(x.n, 1):
			fmt.Fprintf(w, "Crossover (%s): none (the Lambda tier costs less at any number of listeners)\n", x.lb)
		default:
			fmt.Fprintf(w, "Crossover (%s): the container tier costs less from %.0f listeners (with these signals and sessions)\n", x.lb, x.n)
		}
	}
	p := e.Prices
	fmt.Fprintf(w, "\nPrices (on-demand, us-east-1, checked 2026-11-28): Lambda arm64 $%.10g/GB-s + $%.2f/M requests; DynamoDB $%.3f/M writes, $%.3f/M reads;\n"+
		"Fargate Linux/ARM $%.5f/vCPU-h + $%.5f/GB-h; ALB $%.4f/h + $%.3f/LCU-h (an LCU: %.0f new connections/s, %.0f active connections/min, %.0f GB/h, %.0f rule evaluations/s);\n"+
		"NLB $%.4f/h + $%.3f/NLCU-h (a TCP NLCU: %.0f new connections/s, %.0f active connections, %.0f GB/h counting TLS records and TCP/IP headers both ways); a month of %.0f h\n",
		p.LambdaGBSecond, p.LambdaRequestMillion, p.DynamoWriteMillion, p.DynamoReadMillion,
		p.FargateVCPUHour, p.FargateGBHour, p.ALBHour, p.ALBLCUHour,
		ALBLCU.NewConnectionsPerSecond, ALBLCU.ActiveConnectionsPerMinute, ALBLCU.ProcessedGBPerHour, ALBLCU.RuleEvaluationsPerSecond,
		p.NLBHour, p.NLCUHour, NLBLCU.NewConnectionsPerSecond, NLBLCU.ActiveConnections, NLBLCU.ProcessedGBPerHour, hoursPerMonth)
	t := e.Tiers
	fmt.Fprintf(w, "Assumed: Lambda %.0f MB, an invocation every %s per listener, inbox poll %s per listener; task %.2g vCPU / %.2g GB holding %.0f streams (scripts/streambench), %.0f-%.0f tasks, inbox poll per task %s idle, %s for %s after a signal, lease %s;\n"+
		"limits: %.0f scopes per stream (one write each to open and end it, two in the open's transaction), a heartbeat per holding process every %s, the listeners of one installation\n",
		t.LambdaMemoryMB, t.LambdaStream, t.LambdaPoll, t.TaskVCPU, t.TaskMemoryGB, t.StreamsPerTask, t.MinTasks, t.MaxTasks, t.TaskPoll, t.TaskPollFast, t.TaskHotFor, t.Lease,
		t.LimitScopes, t.LimitHeartbeat)
}

func money(m map[string]float64, k string) string {
	v, ok := m[k]
	if !ok {
		return "-"
	}
	return fmt.Sprintf("%.2f", v)
}
