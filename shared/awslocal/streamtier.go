package awslocal

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/botforge/platform/shared/runtime"
)

// The container stream tier (template.yaml's StreamTier=container,
// docs/deploy.md "Stream tiers") run here: StreamTasks long-running
// processes of functions/chatstream-service, each with the task
// definition's environment and its own AWS endpoint checking its calls
// against StreamTaskRole, behind a round-robin reverse proxy that streams
// (the Application Load Balancer's stand-in). The template's
// StreamLoadBalancer.DNSName is the proxy's address, so ChatStreamUrl
// names it as it names the load balancer on AWS.

// DefaultStreamTasks is how many tasks run here (the stack's
// StreamMinTasks default).
const DefaultStreamTasks = 2

// streamTaskID is the logical id the tasks' calls are recorded under.
const streamTaskID = "StreamService"

func (s *Stack) startStreamTier(ctx context.Context, root, binDir string, tpl *Template, services map[string]http.Handler, sec secrets, tasks int) error {
	if _, ok := tpl.conditions["StreamOnContainer"]; !ok {
		return nil
	}
	on, err := tpl.Condition("StreamOnContainer")
	if err != nil || !on {
		return err
	}
	if tasks <= 0 {
		tasks = DefaultStreamTasks
	}
	// Behind the NLB (nlb.go): TCP passed through with a proxy header, TLS
	// ended by the tasks when StreamTlsSecretArn names a secret.
	nlb, useTLS := false, false
	if _, ok := tpl.conditions["StreamOnNlb"]; ok {
		if nlb, err = tpl.Condition("StreamOnNlb"); err != nil {
			return err
		}
		if useTLS, err = tpl.Condition("StreamNlbTls"); err != nil {
			return err
		}
	}
	if useTLS && tpl.params["StreamTlsSecretArn"] == StreamTLSSecretARN {
		cert, err := streamTLS(s.streamTLSDir)
		if err != nil {
			return fmt.Errorf("the stream tier's test certificate: %w", err)
		}
		s.secrets.set(StreamTLSSecretARN, cert)
		s.StreamCertificate = cert
	}
	bin := filepath.Join(binDir, "chatstream-service")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./functions/chatstream-service")
	build.Dir, build.Env = root, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("building functions/chatstream-service: %v\n%s", err, out)
	}
	policy, err := tpl.rolePolicy("StreamTaskRole")
	if err != nil {
		return fmt.Errorf("StreamTaskRole: %w", err)
	}
	taskEnv, err := tpl.taskEnvironment("StreamTaskDefinition")
	if err != nil {
		return err
	}
	task := &Function{LogicalID: streamTaskID, Name: StackName + "-chatstream", RoleID: "StreamTaskRole",
		Policy: policy, source: tpl.path, Env: taskEnv}
	// One AWS endpoint for every task: the calls are the task role's (as
	// a function's endpoint serves all its instances), and the presigned
	// upload URLs of every task name one origin, as the bucket's host on
	// AWS (a page served by one task uploads through a URL another signed).
	epLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	ep := &http.Server{Handler: &endpoint{fn: task, services: services, rec: s.Calls, role: s.code.Role, cors: tpl.bucketCORS}}
	go func() { _ = ep.Serve(epLn) }()
	s.closers = append(s.closers, ep.Close)
	awsURL := "http://" + epLn.Addr().String()
	var backends []*url.URL
	for i := 0; i < tasks; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		addr := l.Addr().String()
		l.Close()
		_, port, _ := net.SplitHostPort(addr)
		env := []string{
			"PATH=" + os.Getenv("PATH"), "TZ=UTC", "LANG=C.UTF-8", "HOME=" + os.TempDir(),
			"AWS_REGION=" + Region, "AWS_DEFAULT_REGION=" + Region,
			"AWS_ACCESS_KEY_ID=" + sec.AccessKey, "AWS_SECRET_ACCESS_KEY=" + sec.SecretKey,
			"AWS_CONFIG_FILE=" + os.DevNull, "AWS_SHARED_CREDENTIALS_FILE=" + os.DevNull, "AWS_EC2_METADATA_DISABLED=true",
			runtime.EnvAllowPrivate + "=1",
			"DYNAMODB_ENDPOINT=" + awsURL, "S3_ENDPOINT=" + awsURL, "SCHEDULER_ENDPOINT=" + awsURL,
			"LOGS_ENDPOINT=" + awsURL, "LAMBDA_ENDPOINT=" + awsURL, "IAM_ENDPOINT=" + awsURL,
		}
		keys := make([]string, 0, len(taskEnv))
		for k := range taskEnv {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if k != "PORT" {
				env = append(env, k+"="+taskEnv[k])
			}
		}
		env = append(env, "PORT="+port)
		if nlb {
			// The stand-in connects from loopback (on AWS: the VPC's
			// ranges), and Secrets Manager and SSM (the certificate's
			// secret or SecureString parameter) are this stack's.
			env = append(env, "AWS_ENDPOINT_URL_SECRETS_MANAGER="+awsURL, "AWS_ENDPOINT_URL_SSM="+awsURL)
			for i, kv := range env {
				if strings.HasPrefix(kv, "PLATFORM_PROXY_PROTOCOL=") {
					env[i] = kv + ",127.0.0.0/8"
				}
			}
		}
		cmd := exec.Command(bin)
		cmd.Env = env
		out := s.out
		if out == nil {
			out = io.Discard
		}
		cmd.Stdout, cmd.Stderr = out, out
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			return err
		}
		s.closers = append(s.closers, func() error {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(15 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
			return nil
		})
		u, _ := url.Parse("http://" + addr)
		if nlb {
			err = waitHealthyNLB(ctx, addr, useTLS)
		} else {
			err = waitHealthy(ctx, u.String()+runtime.ServiceHealthPath)
		}
		if err != nil {
			return fmt.Errorf("stream task %d: %w", i, err)
		}
		backends = append(backends, u)
	}
	lbLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	tpl.SetAttribute("StreamLoadBalancer", "DNSName", lbLn.Addr().String())
	if nlb {
		addrs := make([]string, len(backends))
		for i, b := range backends {
			addrs[i] = b.Host
		}
		go passThrough(lbLn, addrs)
		s.closers = append(s.closers, lbLn.Close)
		scheme := "http://"
		if useTLS {
			scheme = "https://"
		}
		s.log.Info("aws-local: the container stream tier", "tasks", tasks, "loadBalancer", scheme+lbLn.Addr().String()+"/", "type", "nlb")
		return nil
	}
	lb := &http.Server{Handler: roundRobin(backends), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = lb.Serve(lbLn) }()
	s.closers = append(s.closers, lb.Close)
	s.log.Info("aws-local: the container stream tier", "tasks", tasks, "loadBalancer", "http://"+lbLn.Addr().String()+"/")
	return nil
}

// roundRobin is the load balancer's stand-in: each request (a stream, or
// any other Chat API call) to the next task, the answer streamed as it
// comes (FlushInterval -1).
func roundRobin(backends []*url.URL) http.Handler {
	proxies := make([]*httputil.ReverseProxy, len(backends))
	for i, b := range backends {
		p := httputil.NewSingleHostReverseProxy(b)
		p.FlushInterval = -1
		proxies[i] = p
	}
	var next atomic.Uint64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxies[int(next.Add(1)-1)%len(proxies)].ServeHTTP(w, r)
	})
}

func waitHealthy(ctx context.Context, u string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		res, err := http.Get(u)
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("no answer at %s within a minute: %v", u, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// taskEnvironment is the environment of the task definition's container,
// resolved.
func (t *Template) taskEnvironment(id string) (map[string]string, error) {
	defs, _ := t.props(id)["ContainerDefinitions"].([]any)
	if len(defs) != 1 {
		return nil, fmt.Errorf("%s: want one container definition, have %d", id, len(defs))
	}
	c, _ := defs[0].(map[string]any)
	vars, _ := c["Environment"].([]any)
	env := map[string]string{}
	for _, v := range vars {
		kv, _ := v.(map[string]any)
		name := fmt.Sprint(kv["Name"])
		val, err := t.str(kv["Value"])
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", id, name, err)
		}
		env[name] = val
	}
	if _, err := strconv.Atoi(env["PORT"]); err != nil {
		return nil, fmt.Errorf("%s: PORT %q", id, env["PORT"])
	}
	return env, nil
}

// streamTierParams adds o's StreamTier to the stack's parameters.
func streamTierParams(o Options, params map[string]string) map[string]string {
	if o.StreamTier != "" {
		params["StreamTier"] = o.StreamTier
	}
	if o.StreamLoadBalancer != "" {
		params["StreamLoadBalancerType"] = o.StreamLoadBalancer
	}
	// Behind the NLB's stand-in the tasks end TLS with the test
	// certificate (nlb.go) unless the operator names another secret.
	if params["StreamLoadBalancerType"] == "nlb" && params["StreamTlsSecretArn"] == "" {
		params["StreamTlsSecretArn"] = StreamTLSSecretARN
	}
	return params
}
