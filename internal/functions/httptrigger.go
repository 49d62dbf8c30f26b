package functions

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/router"
)

// The HTTP trigger: every function is served at fn-NAME.DOMAIN through the
// router (router.Table), any method and path, the request mapped into the
// event; team API keys reach it, or anyone when it was deployed with
// http_public. A hostname another team's function holds already is not
// served for the later one (its URL is empty).

// HTTPEvent is the event an HTTP trigger passes.
type HTTPEvent struct {
	Method          string            `json:"method"`
	Path            string            `json:"path"`
	Query           map[string]string `json:"query"`
	Headers         map[string]string `json:"headers"` // lower-case names
	Body            string            `json:"body"`
	IsBase64Encoded bool              `json:"is_base64_encoded"`
}

// hostFor is function name's trigger hostname.
func (s *Service) hostFor(name string) string { return "fn-" + name + "." + s.cfg.Domain }

// trigger is the router backend of one function's hostname: each dialled
// connection is served in process (net.Pipe), one invocation per request.
type trigger struct {
	s      *Service
	teamID string
	name   string
}

// route registers f's trigger (or refreshes its access) and returns its
// URL; "" when routes are off or the hostname is another team's.
func (s *Service) route(f Function) string {
	if s.cfg.Routes == nil {
		return ""
	}
	host := s.hostFor(f.Name)
	rt := router.Route{Host: host, Kind: router.HTTP, Backend: trigger{s, f.TeamID, f.Name},
		Access: router.Access{Public: f.Latest.HTTPPublic, TeamID: f.TeamID}}
	if old, ok := s.cfg.Routes.Lookup(host); ok {
		if t, mine := old.Backend.(trigger); !mine || t.teamID != f.TeamID {
			return ""
		}
		s.cfg.Routes.Unregister(host)
	}
	if err := s.cfg.Routes.Register(rt); err != nil {
		s.log.Warn("register a function's HTTP trigger", "host", host, "err", err)
		return ""
	}
	return "http://" + host
}

// unroute removes team's function name's trigger if it holds it.
func (s *Service) unroute(teamID, name string) {
	if s.cfg.Routes == nil {
		return
	}
	host := s.hostFor(name)
	if old, ok := s.cfg.Routes.Lookup(host); ok {
		if t, mine := old.Backend.(trigger); mine && t.teamID == teamID {
			s.cfg.Routes.Unregister(host)
		}
	}
}

// url is f's trigger URL when f holds its hostname.
func (s *Service) url(f Function) string {
	if s.cfg.Routes == nil {
		return ""
	}
	if rt, ok := s.cfg.Routes.Lookup(s.hostFor(f.Name)); ok {
		if t, mine := rt.Backend.(trigger); mine && t.teamID == f.TeamID {
			return "http://" + rt.Host
		}
	}
	return ""
}

// RouteAll registers the trigger of every function (at start).
func (s *Service) RouteAll(ctx context.Context) error {
	fs, err := s.cfg.Store.ListFunctions(ctx, "")
	if err != nil {
		return err
	}
	for _, f := range fs {
		s.route(f)
	}
	return nil
}

// Dial serves one connection from the router.
func (t trigger) Dial(ctx context.Context) (net.Conn, error) {
	client, server := net.Pipe()
	go t.serve(server)
	return client, nil
}

func (t trigger) serve(conn net.Conn) {
	defer conn.Close()
	br := bufio.NewReader(conn)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		resp := t.handle(req)
		resp.Request = req
		if err := resp.Write(conn); err != nil || req.Close {
			return
		}
	}
}

// handle turns req into an invocation and its result into a response:
// a result with status_code (or statusCode) is a response (its headers,
// and body: a string as is, anything else as JSON); any other result is
// 200 with it as JSON. A handler that raised is 502, a timeout 504, both
// with X-PandaStack-Function-Error.
func (t trigger) handle(req *http.Request) *http.Response {
	body, err := io.ReadAll(io.LimitReader(req.Body, MaxEventBytes+1))
	if err != nil || len(body) > MaxEventBytes {
		return t.s.errorResponse(pandastack.Errorf(pandastack.ETooLarge, "the request body is over %d bytes", MaxEventBytes))
	}
	ev := HTTPEvent{Method: req.Method, Path: req.URL.Path, Query: map[string]string{}, Headers: map[string]string{}}
	for k, v := range req.URL.Query() {
		ev.Query[k] = v[0]
	}
	for k, v := range req.Header {
		ev.Headers[strings.ToLower(k)] = strings.Join(v, ", ")
	}
	if utf8.Valid(body) {
		ev.Body = string(body)
	} else {
		ev.Body, ev.IsBase64Encoded = base64.StdEncoding.EncodeToString(body), true
	}
	event, _ := json.Marshal(ev)
	inv, err := t.s.Invoke(req.Context(), t.teamID, t.name, event, InvokeOptions{Trigger: "http"})
	if err != nil {
		return t.s.errorResponse(err)
	}
	h := http.Header{}
	h.Set("X-PandaStack-Invocation-Id", inv.ID)
	switch inv.Status {
	case StatusSucceeded:
		return httpResult(h, inv.Result)
	case StatusFailed, StatusTimedOut:
		status, kind := http.StatusBadGateway, "Unhandled"
		if inv.Status == StatusTimedOut {
			status, kind = http.StatusGatewayTimeout, "Timeout"
		}
		h.Set("X-PandaStack-Function-Error", kind)
		b, _ := json.Marshal(inv.Error)
		return response(status, h, "application/json", b)
	default:
		if inv.Err != nil && pandastack.ErrorCode(inv.Err) != pandastack.EInternal {
			return t.s.errorResponse(inv.Err)
		}
		return t.s.errorResponse(pandastack.Errorf(pandastack.EUnavailable, "invocation %s could not run: %s", inv.ID, inv.Error.Message))
	}
}

// httpResult maps a handler's return value to a response.
func httpResult(h http.Header, result json.RawMessage) *http.Response {
	var r struct {
		Status     *int              `json:"status_code"`
		StatusJS   *int              `json:"statusCode"`
		Headers    map[string]string `json:"headers"`
		Body       json.RawMessage   `json:"body"`
		IsBase64   bool              `json:"is_base64_encoded"`
		IsBase64JS bool              `json:"isBase64Encoded"`
	}
	if bytes.HasPrefix(bytes.TrimSpace(result), []byte("{")) && json.Unmarshal(result, &r) == nil && (r.Status != nil || r.StatusJS != nil) {
		status := 200
		if r.Status != nil {
			status = *r.Status
		} else {
			status = *r.StatusJS
		}
		if status < 100 || status > 999 {
			status = http.StatusBadGateway
		}
		for k, v := range r.Headers {
			h.Set(k, v)
		}
		var s string
		if json.Unmarshal(r.Body, &s) == nil {
			b := []byte(s)
			if r.IsBase64 || r.IsBase64JS {
				if d, err := base64.StdEncoding.DecodeString(s); err == nil {
					b = d
				}
			}
			return response(status, h, "text/plain; charset=utf-8", b)
		}
		if len(r.Body) == 0 || string(r.Body) == "null" {
			return response(status, h, "", nil)
		}
		return response(status, h, "application/json", r.Body)
	}
	return response(http.StatusOK, h, "application/json", result)
}

func (s *Service) errorResponse(err error) *http.Response {
	code := pandastack.ErrorCode(err)
	status := http.StatusInternalServerError
	if s.cfg.StatusFor != nil {
		status = s.cfg.StatusFor(code)
	}
	msg := pandastack.ErrorMessage(err)
	if code == pandastack.EInternal {
		msg = "internal error"
	}
	h := http.Header{}
	if code == pandastack.ERateLimited {
		h.Set("Retry-After", "1")
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]string{"code": code, "message": msg}})
	return response(status, h, "application/json", b)
}

func response(status int, h http.Header, contentType string, body []byte) *http.Response {
	if contentType != "" && h.Get("Content-Type") == "" {
		h.Set("Content-Type", contentType)
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	return &http.Response{StatusCode: status, Status: fmt.Sprintf("%d %s", status, http.StatusText(status)), ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body))}
}
