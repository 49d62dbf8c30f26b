package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/cron"
	"github.com/pandastack/pandastack/internal/functions"
)

// Headers of a function invocation.
const (
	headerInvocationID   = "X-PandaStack-Invocation-Id"
	headerFunctionError  = "X-PandaStack-Function-Error"
	headerInvocationType = "X-PandaStack-Invocation-Type" // "async" (or "Event") for an asynchronous invoke
)

// deployConfig is the "config" part of a deploy.
type deployConfig struct {
	Name           string            `json:"name"`
	Runtime        string            `json:"runtime"`
	Handler        string            `json:"handler"`
	Env            map[string]string `json:"env"`
	TimeoutSeconds int               `json:"timeout_seconds"`
	MemoryMiB      int               `json:"memory_mib"`
	MaxConcurrency int               `json:"max_concurrency"`
	Template       string            `json:"template"`
	HTTPPublic     bool              `json:"http_public"`
	Isolation      string            `json:"isolation"`
}

func (s *Server) fns() (*functions.Service, error) {
	if s.cfg.Functions == nil {
		return nil, pandastack.Errorf(pandastack.EUnavailable, "functions are not enabled on this server")
	}
	return s.cfg.Functions, nil
}

// deployFunction takes a multipart/form-data body: a "config" part (JSON:
// name, runtime, handler, env, timeout_seconds, memory_mib,
// max_concurrency, template) and a "bundle" part (tar.gz or zip).
func (s *Server) deployFunction(w http.ResponseWriter, r *http.Request) error {
	fs, err := s.fns()
	if err != nil {
		return err
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "multipart/form-data" {
		return invalid("a deploy is multipart/form-data with a config part (JSON) and a bundle part (tar.gz or zip)")
	}
	r.Body = http.MaxBytesReader(w, r.Body, fs.MaxBundleBytes()+maxJSONBody)
	mr, err := r.MultipartReader()
	if err != nil {
		return invalid("read the multipart body: %v", err)
	}
	var cfg deployConfig
	var bundle []byte
	gotConfig := false
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return bodyErr(err, fs.MaxBundleBytes())
		}
		switch part.FormName() {
		case "config":
			dec := json.NewDecoder(io.LimitReader(part, maxJSONBody))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&cfg); err != nil {
				return jsonError(err)
			}
			gotConfig = true
		case "bundle":
			if bundle, err = io.ReadAll(io.LimitReader(part, fs.MaxBundleBytes()+1)); err != nil {
				return bodyErr(err, fs.MaxBundleBytes())
			}
			if int64(len(bundle)) > fs.MaxBundleBytes() {
				return pandastack.Errorf(pandastack.ETooLarge, "bundle is over the limit of %d bytes", fs.MaxBundleBytes())
			}
		}
	}
	if !gotConfig {
		return invalid("the config part (JSON) is required")
	}
	if bundle == nil {
		return invalid("the bundle part (tar.gz or zip) is required")
	}
	f, err := fs.Deploy(r.Context(), caller(r).team.ID, functions.DeployParams{Name: cfg.Name, Runtime: cfg.Runtime, Handler: cfg.Handler,
		Env: cfg.Env, TimeoutSeconds: cfg.TimeoutSeconds, MemoryMiB: cfg.MemoryMiB, MaxConcurrency: cfg.MaxConcurrency,
		Template: cfg.Template, HTTPPublic: cfg.HTTPPublic, Isolation: cfg.Isolation, Bundle: bundle})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, presentFunction(f))
	return nil
}

func bodyErr(err error, limit int64) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return pandastack.Errorf(pandastack.ETooLarge, "the deploy body is over the limit (bundle at most %d bytes)", limit)
	}
	return invalid("read the multipart body: %v", err)
}

// functionView is a function as the API shows it.
type functionView struct {
	functions.Function
	TimeoutSeconds int `json:"timeout_seconds"`
}

func presentFunction(f functions.Function) functionView {
	return functionView{Function: f, TimeoutSeconds: int(f.Latest.Timeout.Seconds())}
}

func (s *Server) listFunctions(w http.ResponseWriter, r *http.Request) error {
	fs, err := s.fns()
	if err != nil {
		return err
	}
	list, err := fs.List(r.Context(), caller(r).team.ID)
	if err != nil {
		return err
	}
	out := make([]functionView, len(list))
	for i, f := range list {
		out[i] = presentFunction(f)
	}
	writeJSON(w, http.StatusOK, map[string]any{"functions": out})
	return nil
}

func (s *Server) getFunction(w http.ResponseWriter, r *http.Request) error {
	fs, err := s.fns()
	if err != nil {
		return err
	}
	f, err := fs.Get(r.Context(), caller(r).team.ID, r.PathValue("name"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, presentFunction(f))
	return nil
}

func (s *Server) deleteFunction(w http.ResponseWriter, r *http.Request) error {
	fs, err := s.fns()
	if err != nil {
		return err
	}
	if err := fs.Delete(r.Context(), caller(r).team.ID, r.PathValue("name")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// invokeFunction runs the function on the JSON body. Sync: 200 with the
// handler's return value as the body, or (the handler raised, or timed
// out) 200 with X-PandaStack-Function-Error and {type, message, stack}.
// Async (?async=1 or X-PandaStack-Invocation-Type: async): 202 with the
// invocation to poll.
func (s *Server) invokeFunction(w http.ResponseWriter, r *http.Request) error {
	fs, err := s.fns()
	if err != nil {
		return err
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, functions.MaxEventBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return pandastack.Errorf(pandastack.ETooLarge, "the event is over %d bytes", functions.MaxEventBytes)
		}
		return invalid("read the body: %v", err)
	}
	async := r.URL.Query().Get("async")
	t := r.Header.Get(headerInvocationType)
	opts := functions.InvokeOptions{Async: async == "1" || async == "true" || t == "async" || t == "Event"}
	inv, err := fs.Invoke(r.Context(), caller(r).team.ID, r.PathValue("name"), body, opts)
	if err != nil {
		if pandastack.ErrorCode(err) == pandastack.ERateLimited {
			w.Header().Set("Retry-After", "1")
		}
		return err
	}
	w.Header().Set(headerInvocationID, inv.ID)
	switch {
	case opts.Async:
		writeJSON(w, http.StatusAccepted, inv)
	case inv.Status == functions.StatusSucceeded:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.Write(bytes.TrimSpace(inv.Result))
		w.Write([]byte{'\n'})
	case inv.Status == functions.StatusError:
		code, msg := pandastack.EUnavailable, inv.Error.Message
		if c := pandastack.ErrorCode(inv.Err); inv.Err != nil && c != pandastack.EInternal {
			code, msg = c, pandastack.ErrorMessage(inv.Err)
		}
		if code == pandastack.EUnavailable || code == pandastack.ERateLimited {
			w.Header().Set("Retry-After", "1") // the host was short of room: worth a retry
		}
		return pandastack.Errorf(code, "invocation %s could not run: %s", inv.ID, msg)
	default:
		kind := "Unhandled"
		if inv.Status == functions.StatusTimedOut {
			kind = "Timeout"
		}
		w.Header().Set(headerFunctionError, kind)
		writeJSON(w, http.StatusOK, inv.Error)
	}
	return nil
}

func (s *Server) getInvocation(w http.ResponseWriter, r *http.Request) error {
	fs, err := s.fns()
	if err != nil {
		return err
	}
	inv, err := fs.GetInvocation(r.Context(), caller(r).team.ID, r.PathValue("name"), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, inv)
	return nil
}

func (s *Server) crons() (*cron.Service, error) {
	if s.cfg.Cron == nil {
		return nil, pandastack.Errorf(pandastack.EUnavailable, "cron schedules are not enabled on this server")
	}
	return s.cfg.Cron, nil
}

func (s *Server) createSchedule(w http.ResponseWriter, r *http.Request) error {
	c, err := s.crons()
	if err != nil {
		return err
	}
	var p cron.CreateParams
	if err := decodeJSON(w, r, &p); err != nil {
		return err
	}
	sc, err := c.Create(r.Context(), caller(r).team.ID, p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, sc)
	return nil
}

func (s *Server) listSchedules(w http.ResponseWriter, r *http.Request) error {
	c, err := s.crons()
	if err != nil {
		return err
	}
	list, err := c.List(r.Context(), caller(r).team.ID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"schedules": list})
	return nil
}

func (s *Server) getSchedule(w http.ResponseWriter, r *http.Request) error {
	c, err := s.crons()
	if err != nil {
		return err
	}
	sc, err := c.Get(r.Context(), caller(r).team.ID, r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sc)
	return nil
}

func (s *Server) deleteSchedule(w http.ResponseWriter, r *http.Request) error {
	c, err := s.crons()
	if err != nil {
		return err
	}
	if err := c.Delete(r.Context(), caller(r).team.ID, r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) scheduleRuns(w http.ResponseWriter, r *http.Request) error {
	c, err := s.crons()
	if err != nil {
		return err
	}
	limit := 100
	if v := r.URL.Query().Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > 1000 {
			return invalid("limit must be between 1 and 1000")
		}
	}
	runs, err := c.Runs(r.Context(), caller(r).team.ID, r.PathValue("id"), limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"runs": runs})
	return nil
}
