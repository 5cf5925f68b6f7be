package awslocal

// The embedded SSM Parameter Store stand-in: the stack's SecureString
// parameters (the OpenID client secret /<stack>/oidc-client-secret the
// admin function reads at cold start, docs/signin.md). GetParameter for
// the functions (each call checked against the function's role, as IAM
// would: ssm:GetParameter on the parameter's ARN), PutParameter,
// GetParameter and DeleteParameter for the operator (`aws ssm
// put-parameter` with <data-dir>/aws-local/operator.env). Kept in one
// file of the data directory (0600), so a secret outlives a restart.

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"sync"

	"github.com/botforge/platform/shared/fsutil"
)

type ssmParameter struct {
	Value   string `json:"value"`
	Type    string `json:"type"`
	Version int64  `json:"version"`
}

type ssmParameters struct {
	path string
	mu   sync.Mutex
	p    map[string]ssmParameter // by name
}

func openSSM(p string, preset map[string]string) (*ssmParameters, error) {
	ps := &ssmParameters{path: p, p: map[string]ssmParameter{}}
	b, err := os.ReadFile(p)
	if err == nil {
		err = json.Unmarshal(b, &ps.p)
	} else if os.IsNotExist(err) {
		err = nil
	}
	if err != nil {
		return nil, err
	}
	if len(preset) > 0 {
		ps.mu.Lock()
		defer ps.mu.Unlock()
		for k, v := range preset {
			old := ps.p[k]
			ps.p[k] = ssmParameter{Value: v, Type: "SecureString", Version: old.Version + 1}
		}
		if err := ps.save(); err != nil {
			return nil, err
		}
	}
	return ps, nil
}

// save writes the parameters (under mu), readable by the owner only.
func (ps *ssmParameters) save() error {
	b, _ := json.Marshal(ps.p)
	if err := fsutil.WriteFileAtomic(ps.path, b); err != nil {
		return err
	}
	return os.Chmod(ps.path, 0o600)
}

func ssmARN(name string) string {
	return "arn:aws:ssm:" + Region + ":" + Account + ":parameter/" + strings.TrimPrefix(name, "/")
}

// ssmName is the parameter's name in a call, which SSM takes as a name or
// as the parameter's ARN (the stream tasks' StreamTlsSecretArn): a
// hierarchical name's ARN drops its leading '/' (parameter/a/b is /a/b,
// parameter/a is a).
func ssmName(name string) string {
	if !strings.HasPrefix(name, "arn:") {
		return name
	}
	i := strings.Index(name, ":parameter/")
	if i < 0 {
		return name
	}
	n := name[i+len(":parameter/"):]
	if strings.Contains(n, "/") {
		n = "/" + n
	}
	return n
}

// ssmAuthz: the IAM action of an SSM call, on the parameter's ARN.
func ssmAuthz(r *http.Request, body []byte) []authz {
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "AmazonSSM.")
	var in struct{ Name string }
	_ = json.Unmarshal(body, &in)
	return []authz{{action: "ssm:" + op, resource: ssmARN(ssmName(in.Name))}}
}

func ssmError(w http.ResponseWriter, code, msg string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": code, "message": msg})
}

func (ps *ssmParameters) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "AmazonSSM.")
	var in struct {
		Name, Value, Type string
		Overwrite         bool
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Name == "" {
		ssmError(w, "ValidationException", "a parameter name is required")
		return
	}
	in.Name = ssmName(in.Name)
	ps.mu.Lock()
	defer ps.mu.Unlock()
	p, ok := ps.p[in.Name]
	var out any
	switch op {
	case "GetParameter":
		if !ok {
			ssmError(w, "ParameterNotFound", "parameter "+in.Name+" not found")
			return
		}
		out = map[string]any{"Parameter": map[string]any{"Name": in.Name, "Type": p.Type, "Value": p.Value, "Version": p.Version, "ARN": ssmARN(in.Name), "DataType": "text"}}
	case "PutParameter":
		if ok && !in.Overwrite {
			ssmError(w, "ParameterAlreadyExists", "parameter "+in.Name+" already exists")
			return
		}
		if in.Type == "" {
			in.Type = p.Type
		}
		ps.p[in.Name] = ssmParameter{Value: in.Value, Type: in.Type, Version: p.Version + 1}
		if err := ps.save(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		out = map[string]any{"Version": p.Version + 1, "Tier": "Standard"}
	case "DeleteParameter":
		if !ok {
			ssmError(w, "ParameterNotFound", "parameter "+in.Name+" not found")
			return
		}
		delete(ps.p, in.Name)
		if err := ps.save(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		out = map[string]any{}
	default:
		ssmError(w, "InvalidAction", "aws-local: SSM "+op+" is not served")
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	_ = json.NewEncoder(w).Encode(out)
}
