package pandastack

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"mime/multipart"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

// FunctionConfig is a function's settings at deploy.
type FunctionConfig struct {
	Name           string            `json:"name"`
	Runtime        string            `json:"runtime"` // "python" or "node"
	Handler        string            `json:"handler"` // FILE.FUNCTION, e.g. main.handler
	Env            map[string]string `json:"env,omitempty"`
	TimeoutSeconds int               `json:"timeout_seconds,omitempty"`
	MemoryMiB      int               `json:"memory_mib,omitempty"`
	MaxConcurrency int               `json:"max_concurrency,omitempty"`
	Template       string            `json:"template,omitempty"`
	// HTTPPublic lets anyone call the HTTP trigger (fn-NAME.DOMAIN);
	// otherwise it takes the team's API keys.
	HTTPPublic bool `json:"http_public,omitempty"`
	// Isolation is "fresh" (default: a new microVM per invocation) or
	// "warm" (microVMs reused between invocations: faster, state shared).
	Isolation string `json:"isolation,omitempty"`
}

// Function is a deployed function; Latest is its serving version.
type Function struct {
	ID             string    `json:"id"`
	Name           string    `json:"name"`
	Version        int       `json:"version"`
	URL            string    `json:"url"` // the HTTP trigger ("" when its hostname is another team's)
	TimeoutSeconds int       `json:"timeout_seconds"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
	Latest         struct {
		Version        int       `json:"version"`
		Runtime        string    `json:"runtime"`
		Handler        string    `json:"handler"`
		EnvKeys        []string  `json:"env_keys"`
		MemoryMiB      int       `json:"memory_mib"`
		MaxConcurrency int       `json:"max_concurrency"`
		HTTPPublic     bool      `json:"http_public"`
		Isolation      string    `json:"isolation"`
		BundleSHA256   string    `json:"bundle_sha256"`
		BundleBytes    int64     `json:"bundle_bytes"`
		CreatedAt      time.Time `json:"created_at"`
	} `json:"latest"`
}

// FunctionError is what a handler raised (Type "Timeout" when it ran past
// its timeout).
type FunctionError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
	Stack   string `json:"stack"`
}

// Invocation is one call of a function.
type Invocation struct {
	ID          string          `json:"id"`
	Function    string          `json:"function"`
	Version     int             `json:"version"`
	Trigger     string          `json:"trigger"`
	ExecutionID string          `json:"execution_id"`
	Status      string          `json:"status"` // queued, running, succeeded, failed, timed_out, error
	Result      json.RawMessage `json:"result"`
	Error       *FunctionError  `json:"error"`
	Logs        string          `json:"logs"`
	CreatedAt   time.Time       `json:"created_at"`
	EndedAt     *time.Time      `json:"ended_at"`
	DurationMs  int64           `json:"duration_ms"`
}

// InvokeResult is a synchronous invocation's answer: Body is the
// handler's return value, or — when FunctionError is set ("Unhandled" or
// "Timeout") — the error it raised, also decoded in Error.
type InvokeResult struct {
	InvocationID  string
	Body          json.RawMessage
	FunctionError string
	Error         *FunctionError
}

// DeployFunction uploads bundle (a tar.gz or zip; see BundleDir) as a
// new version of function cfg.Name; it answers once the version serves.
func (c *Client) DeployFunction(ctx context.Context, cfg FunctionConfig, bundle []byte) (*Function, error) {
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	cw, err := mw.CreateFormField("config")
	if err != nil {
		return nil, err
	}
	if err := json.NewEncoder(cw).Encode(cfg); err != nil {
		return nil, fmt.Errorf("pandastack: encode function config: %w", err)
	}
	bw, err := mw.CreateFormFile("bundle", "bundle")
	if err != nil {
		return nil, err
	}
	if _, err := bw.Write(bundle); err != nil {
		return nil, err
	}
	if err := mw.Close(); err != nil {
		return nil, err
	}
	f := &Function{}
	err = c.do(ctx, request{method: "POST", path: "/v1/functions", body: &body, contentType: mw.FormDataContentType()}, f)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// BundleDir packs directory dir as a tar.gz bundle (regular files only).
func BundleDir(dir string) ([]byte, error) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := tw.WriteHeader(&tar.Header{Name: filepath.ToSlash(rel), Mode: int64(info.Mode().Perm()), Size: info.Size(), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("pandastack: bundle %s: %w", dir, err)
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// GetFunction returns a function by name.
func (c *Client) GetFunction(ctx context.Context, name string) (*Function, error) {
	f := &Function{}
	if err := c.do(ctx, request{method: "GET", path: "/v1/functions/" + url.PathEscape(name)}, f); err != nil {
		return nil, err
	}
	return f, nil
}

// ListFunctions returns the team's functions.
func (c *Client) ListFunctions(ctx context.Context) ([]Function, error) {
	var out struct {
		Functions []Function `json:"functions"`
	}
	if err := c.do(ctx, request{method: "GET", path: "/v1/functions"}, &out); err != nil {
		return nil, err
	}
	return out.Functions, nil
}

// DeleteFunction removes a function with its versions and invocations.
func (c *Client) DeleteFunction(ctx context.Context, name string) error {
	return c.do(ctx, request{method: "DELETE", path: "/v1/functions/" + url.PathEscape(name)}, nil)
}

// InvokeFunction runs a function on event (JSON) and waits for it.
func (c *Client) InvokeFunction(ctx context.Context, name string, event json.RawMessage) (*InvokeResult, error) {
	resp, err := c.send(ctx, request{method: "POST", path: "/v1/functions/" + url.PathEscape(name) + "/invoke", body: bytes.NewReader(event), contentType: "application/json"})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("pandastack: read invocation answer: %w", err)
	}
	r := &InvokeResult{InvocationID: resp.Header.Get("X-PandaStack-Invocation-Id"), Body: bytes.TrimSpace(b),
		FunctionError: resp.Header.Get("X-PandaStack-Function-Error")}
	if r.FunctionError != "" {
		r.Error = &FunctionError{}
		if err := json.Unmarshal(b, r.Error); err != nil {
			return nil, fmt.Errorf("pandastack: decode function error: %w", err)
		}
	}
	return r, nil
}

// InvokeFunctionAsync queues an invocation and returns it at once; poll
// it with GetInvocation.
func (c *Client) InvokeFunctionAsync(ctx context.Context, name string, event json.RawMessage) (*Invocation, error) {
	inv := &Invocation{}
	err := c.do(ctx, request{method: "POST", path: "/v1/functions/" + url.PathEscape(name) + "/invoke", query: url.Values{"async": {"1"}},
		body: bytes.NewReader(event), contentType: "application/json"}, inv)
	if err != nil {
		return nil, err
	}
	return inv, nil
}

// GetInvocation returns one invocation of a function, with its logs.
func (c *Client) GetInvocation(ctx context.Context, name, id string) (*Invocation, error) {
	inv := &Invocation{}
	if err := c.do(ctx, request{method: "GET", path: "/v1/functions/" + url.PathEscape(name) + "/invocations/" + url.PathEscape(id)}, inv); err != nil {
		return nil, err
	}
	return inv, nil
}

// ScheduleParams is a cron schedule to create.
type ScheduleParams struct {
	Function string          `json:"function"`
	Schedule string          `json:"schedule"` // 5 fields, 6 with seconds, @every 10s, @daily, @at 2026-01-02T15:04:05Z
	TZ       string          `json:"tz,omitempty"`
	Data     json.RawMessage `json:"data,omitempty"`
	Overlap  string          `json:"overlap,omitempty"` // skip (default), queue, allow
	Missed   string          `json:"missed,omitempty"`  // skip (default), catch_up
}

// Schedule is a cron schedule of a function.
type Schedule struct {
	ID         string          `json:"id"`
	Function   string          `json:"function"`
	Schedule   string          `json:"schedule"`
	TZ         string          `json:"tz"`
	Data       json.RawMessage `json:"data"`
	Overlap    string          `json:"overlap"`
	Missed     string          `json:"missed"`
	NextFireAt *time.Time      `json:"next_fire_at"`
	CreatedAt  time.Time       `json:"created_at"`
}

// ScheduleRun is one occurrence of a schedule.
type ScheduleRun struct {
	ExecutionID  string     `json:"execution_id"`
	ScheduleID   string     `json:"schedule_id"`
	FireAt       time.Time  `json:"fire_at"`
	Status       string     `json:"status"` // pending, queued, running, succeeded, failed, timed_out, skipped
	Attempts     int        `json:"attempts"`
	InvocationID string     `json:"invocation_id"`
	Message      string     `json:"message"`
	StartedAt    *time.Time `json:"started_at"`
	EndedAt      *time.Time `json:"ended_at"`
	DurationMs   int64      `json:"duration_ms"`
}

// CreateSchedule schedules a function.
func (c *Client) CreateSchedule(ctx context.Context, p ScheduleParams) (*Schedule, error) {
	s := &Schedule{}
	if err := c.do(ctx, request{method: "POST", path: "/v1/schedules", body: p}, s); err != nil {
		return nil, err
	}
	return s, nil
}

// ListSchedules returns the team's schedules.
func (c *Client) ListSchedules(ctx context.Context) ([]Schedule, error) {
	var out struct {
		Schedules []Schedule `json:"schedules"`
	}
	if err := c.do(ctx, request{method: "GET", path: "/v1/schedules"}, &out); err != nil {
		return nil, err
	}
	return out.Schedules, nil
}

// DeleteSchedule removes a schedule and its run history.
func (c *Client) DeleteSchedule(ctx context.Context, id string) error {
	return c.do(ctx, request{method: "DELETE", path: "/v1/schedules/" + url.PathEscape(id)}, nil)
}

// ScheduleRuns returns a schedule's newest runs, newest first.
func (c *Client) ScheduleRuns(ctx context.Context, id string) ([]ScheduleRun, error) {
	var out struct {
		Runs []ScheduleRun `json:"runs"`
	}
	if err := c.do(ctx, request{method: "GET", path: "/v1/schedules/" + url.PathEscape(id) + "/runs"}, &out); err != nil {
		return nil, err
	}
	return out.Runs, nil
}
