// Package sqlhttp serves SQL over HTTP for the managed databases,
// wire-compatible with Neon's POST /sql, so the stock
// @neondatabase/serverless driver's neon() works against PandaStack with
// fetchEndpoint pointed at the server. Each request names its database and
// credentials in the Neon-Connection-String header (the host's first label
// is the database id, found in the router.Table like the database router
// finds it); PostgreSQL in the database's machine checks the password.
//
// Single queries with parameters, batches in one transaction (with the
// Neon-Batch-* isolation, read-only and deferrable headers), array or
// object rows, every value in PostgreSQL's text form; PostgreSQL errors
// answer 400 with their fields. Sessions are pooled per database, role
// and password, and reset between requests (pool.go).
package sqlhttp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pandastack/pandastack/internal/router"
)

// Limits of a request.
const (
	MaxRequestBytes  = 10 << 20
	MaxResponseBytes = 10 << 20
	MaxBatchQueries  = 1024
	queryTimeout     = 5 * time.Minute
)

// Config configures a Handler.
type Config struct {
	// Table holds the databases' routes (<id>.<Domain>, Kind TCP).
	Table *router.Table
	// Domain is the parent of databases' host names.
	Domain string
	Logger *slog.Logger
}

// Handler serves POST /sql (and its CORS preflight). Close ends its
// pooled sessions.
type Handler struct {
	cfg   Config
	log   *slog.Logger
	pools *pools
}

// New returns a Handler for cfg.
func New(cfg Config) *Handler {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.Domain = router.NormalizeHost(cfg.Domain)
	return &Handler{cfg: cfg, log: cfg.Logger, pools: newPools()}
}

// ClosePools ends the pooled sessions of database id (deleted,
// hibernated, or moved to another machine); the next request opens new
// ones.
func (h *Handler) ClosePools(id string) {
	if n := h.pools.closeDatabase(id); n > 0 {
		h.log.Debug("sql over http: pools closed", "database", id, "pools", n)
	}
}

// Close ends every pooled session.
func (h *Handler) Close() { h.pools.closeAll() }

type query struct {
	Query  string `json:"query"`
	Params []any  `json:"params"`
}

type request struct {
	query
	ArrayMode *bool   `json:"arrayMode"`
	Queries   []query `json:"queries"`
}

// field is a column of a result, as node-postgres describes it.
type field struct {
	Name             string `json:"name"`
	DataTypeID       uint32 `json:"dataTypeID"`
	TableID          uint32 `json:"tableID"`
	ColumnID         uint16 `json:"columnID"`
	DataTypeSize     int16  `json:"dataTypeSize"`
	DataTypeModifier int32  `json:"dataTypeModifier"`
	Format           string `json:"format"`
}

type result struct {
	Command    string  `json:"command"`
	RowCount   *int64  `json:"rowCount"`
	RowAsArray bool    `json:"rowAsArray"`
	Fields     []field `json:"fields"`
	Rows       []any   `json:"rows"`
}

// httpError is an answer other than 200.
type httpError struct {
	status int
	body   map[string]any
}

func (e *httpError) Error() string { return fmt.Sprint(e.body["message"]) }

func fail(status int, format string, args ...any) *httpError {
	return &httpError{status: status, body: map[string]any{"message": fmt.Sprintf(format, args...)}}
}

// pgFail is a PostgreSQL error as Neon answers it: 400 with its fields.
func pgFail(pe *pgconn.PgError) *httpError {
	b := map[string]any{"message": pe.Message, "code": pe.Code, "severity": pe.Severity}
	for k, v := range map[string]string{"detail": pe.Detail, "hint": pe.Hint, "where": pe.Where, "schema": pe.SchemaName,
		"table": pe.TableName, "column": pe.ColumnName, "dataType": pe.DataTypeName, "constraint": pe.ConstraintName,
		"file": pe.File, "routine": pe.Routine, "internalQuery": pe.InternalQuery} {
		if v != "" {
			b[k] = v
		}
	}
	if pe.Position != 0 {
		b["position"] = strconv.Itoa(int(pe.Position))
	}
	if pe.InternalPosition != 0 {
		b["internalPosition"] = strconv.Itoa(int(pe.InternalPosition))
	}
	if pe.Line != 0 {
		b["line"] = strconv.Itoa(int(pe.Line))
	}
	return &httpError{status: http.StatusBadRequest, body: b}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// ServeHTTP answers one request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Access-Control-Allow-Origin", "*")
	if r.Method == http.MethodOptions {
		w.Header().Set("Allow", "OPTIONS, POST")
		w.Header().Set("Access-Control-Allow-Methods", "OPTIONS, POST")
		w.Header().Set("Access-Control-Allow-Headers", "Authorization, Neon-Connection-String, Neon-Raw-Text-Output, Neon-Array-Mode, "+
			"Neon-Pool-Opt-In, Neon-Batch-Read-Only, Neon-Batch-Isolation-Level, Neon-Batch-Deferrable")
		w.Header().Set("Access-Control-Max-Age", "86400")
		w.WriteHeader(http.StatusOK)
		return
	}
	tm := newTiming()
	out, err := h.serve(r.WithContext(withTiming(r.Context(), tm)), w.Header())
	status := http.StatusOK
	if err != nil {
		var he *httpError
		if !errors.As(err, &he) {
			h.log.Error("sql over http", "err", err)
			he = fail(http.StatusInternalServerError, "internal error")
		}
		status, out = he.status, he.body
	}
	tm.lap()
	writeJSON(w, status, out)
	tm.write = tm.lap()
	tm.log(h.log, status)
}

func (h *Handler) serve(r *http.Request, hdr http.Header) (any, error) {
	if r.Method != http.MethodPost {
		return nil, fail(http.StatusMethodNotAllowed, "use POST")
	}
	cs := r.Header.Get("Neon-Connection-String")
	if cs == "" {
		return nil, fail(http.StatusBadRequest, "missing Neon-Connection-String header")
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxRequestBytes+1))
	if err != nil {
		return nil, fail(http.StatusBadRequest, "read request: %v", err)
	}
	if len(body) > MaxRequestBytes {
		return nil, fail(http.StatusRequestEntityTooLarge, "request is too large (max is %d bytes)", MaxRequestBytes)
	}
	var req request
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fail(http.StatusBadRequest, "request body is not JSON: %v", err)
	}
	batch := req.Queries != nil
	if !batch && req.Query == "" {
		return nil, fail(http.StatusBadRequest, "request needs a query (or queries)")
	}
	if len(req.Queries) > MaxBatchQueries {
		return nil, fail(http.StatusBadRequest, "a batch holds at most %d queries", MaxBatchQueries)
	}
	arrayMode := r.Header.Get("Neon-Array-Mode") == "true" || (req.ArrayMode != nil && *req.ArrayMode)
	begin, err := beginStatement(r.Header)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
	defer cancel()
	t, err := h.target(cs)
	if err != nil {
		return nil, err
	}
	timingOf(ctx).parse = timingOf(ctx).lap()
	if !batch {
		return h.withSession(ctx, t, func(conn *pgconn.PgConn) (any, error) {
			budget := int64(MaxResponseBytes)
			return run(ctx, conn, req.query, arrayMode, &budget)
		})
	}
	for _, k := range []string{"Neon-Batch-Isolation-Level", "Neon-Batch-Read-Only", "Neon-Batch-Deferrable"} {
		if v := r.Header.Get(k); v != "" {
			hdr.Set(k, v)
		}
	}
	return h.withSession(ctx, t, func(conn *pgconn.PgConn) (any, error) {
		budget := int64(MaxResponseBytes)
		if err := exec(ctx, conn, begin); err != nil {
			return nil, err
		}
		results := make([]*result, 0, len(req.Queries))
		for _, q := range req.Queries {
			res, err := run(ctx, conn, q, arrayMode, &budget)
			if err != nil {
				_ = exec(ctx, conn, "ROLLBACK")
				return nil, err
			}
			results = append(results, res)
		}
		if err := exec(ctx, conn, "COMMIT"); err != nil {
			return nil, err
		}
		return map[string]any{"results": results}, nil
	})
}

// withSession runs fn on a session of t's pool. A pooled session found
// dead before fn sent anything (its machine hibernated or was replaced
// since) is dropped and fn runs once more on a new one.
func (h *Handler) withSession(ctx context.Context, t target, fn func(*pgconn.PgConn) (any, error)) (any, error) {
	tm := timingOf(ctx)
	for try := 1; ; try++ {
		c, err := h.session(ctx, t)
		tm.session += tm.lap()
		if err != nil {
			return nil, err
		}
		out, err := fn(c.Conn().PgConn())
		tm.query += tm.lap()
		dead := c.Conn().IsClosed()
		c.Release()
		if err != nil && dead && try == 1 && pgconn.SafeToRetry(err) {
			h.log.Debug("sql over http: pooled session was dead; trying a new one", "database", t.id, "err", err)
			continue
		}
		return out, err
	}
}

// beginStatement opens a batch's transaction as its headers ask.
func beginStatement(h http.Header) (string, error) {
	stmt := "BEGIN"
	switch lvl := h.Get("Neon-Batch-Isolation-Level"); lvl {
	case "":
	case "Serializable", "ReadUncommitted", "ReadCommitted", "RepeatableRead":
		words := map[string]string{"Serializable": "SERIALIZABLE", "ReadUncommitted": "READ UNCOMMITTED",
			"ReadCommitted": "READ COMMITTED", "RepeatableRead": "REPEATABLE READ"}
		stmt += " ISOLATION LEVEL " + words[lvl]
	default:
		return "", fail(http.StatusBadRequest, "invalid Neon-Batch-Isolation-Level %q", lvl)
	}
	if h.Get("Neon-Batch-Read-Only") == "true" {
		stmt += " READ ONLY"
	}
	if h.Get("Neon-Batch-Deferrable") == "true" {
		stmt += " DEFERRABLE"
	}
	return stmt, nil
}

// target is the database, role and password the connection string names.
func (h *Handler) target(cs string) (target, error) {
	u, err := url.Parse(cs)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.User == nil {
		return target{}, fail(http.StatusBadRequest, "Neon-Connection-String is not a postgres:// URI with a user")
	}
	host := router.NormalizeHost(u.Hostname())
	label, ok := strings.CutSuffix(host, "."+h.cfg.Domain)
	if !ok || label == "" || strings.Contains(label, ".") {
		return target{}, fail(http.StatusBadRequest, "host %s is not a database of this server (<id>.%s)", host, h.cfg.Domain)
	}
	rt, ok := h.cfg.Table.Lookup(host)
	if !ok || rt.Kind != router.TCP {
		return target{}, fail(http.StatusBadRequest, "database %s does not exist", label)
	}
	password, _ := u.User.Password()
	return target{id: label, backend: rt.Backend, user: u.User.Username(), password: password,
		dbname: strings.TrimPrefix(u.Path, "/")}, nil
}

// session takes a session of t's pool, opening one (the database checks
// the password) when none is free.
func (h *Handler) session(ctx context.Context, t target) (*pgxpool.Conn, error) {
	c, err := h.pools.acquire(ctx, t)
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) {
			return nil, pgFail(pe)
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("connect to database %s: %w", t.id, err)
		}
		h.log.Info("sql over http: database unreachable", "database", t.id, "err", err)
		return nil, fail(http.StatusServiceUnavailable, "database %s is not reachable now; try again", t.id)
	}
	return c, nil
}

func exec(ctx context.Context, conn *pgconn.PgConn, sql string) error {
	_, err := conn.Exec(ctx, sql).ReadAll()
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pgFail(pe)
	}
	return err
}

// params turns JSON parameters into PostgreSQL text (null stays NULL).
func params(in []any) [][]byte {
	out := make([][]byte, len(in))
	for i, p := range in {
		switch v := p.(type) {
		case nil:
		case string:
			out[i] = []byte(v)
		case bool:
			out[i] = []byte(strconv.FormatBool(v))
		case float64:
			out[i] = []byte(strconv.FormatFloat(v, 'f', -1, 64))
		default:
			b, _ := json.Marshal(v)
			out[i] = b
		}
	}
	return out
}

// run executes one query (extended protocol, text results).
func run(ctx context.Context, conn *pgconn.PgConn, q query, arrayMode bool, budget *int64) (*result, error) {
	rr := conn.ExecParams(ctx, q.Query, params(q.Params), nil, nil, nil)
	res := &result{RowAsArray: arrayMode, Fields: []field{}, Rows: []any{}}
	fds := rr.FieldDescriptions()
	for _, fd := range fds {
		res.Fields = append(res.Fields, field{Name: fd.Name, DataTypeID: fd.DataTypeOID, TableID: fd.TableOID,
			ColumnID: fd.TableAttributeNumber, DataTypeSize: fd.DataTypeSize, DataTypeModifier: fd.TypeModifier, Format: "text"})
	}
	for rr.NextRow() {
		vals := rr.Values()
		for _, v := range vals {
			*budget -= int64(len(v)) + 8
		}
		if *budget < 0 {
			rr.Close()
			return nil, fail(http.StatusInsufficientStorage, "response is too large (max is %d bytes)", MaxResponseBytes)
		}
		if arrayMode {
			row := make([]*string, len(vals))
			for i, v := range vals {
				row[i] = text(v)
			}
			res.Rows = append(res.Rows, row)
		} else {
			row := make(map[string]*string, len(vals))
			for i, v := range vals {
				row[fds[i].Name] = text(v)
			}
			res.Rows = append(res.Rows, row)
		}
	}
	tag, err := rr.Close()
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) {
			return nil, pgFail(pe)
		}
		return nil, fmt.Errorf("run query: %w", err)
	}
	res.Command, res.RowCount = commandOf(tag.String())
	return res, nil
}

func text(v []byte) *string {
	if v == nil {
		return nil
	}
	s := string(v)
	return &s
}

// commandOf splits a command tag: "INSERT 0 5" is INSERT and 5; a tag
// without a count ("CREATE TABLE") has none.
func commandOf(tag string) (string, *int64) {
	f := strings.Fields(tag)
	if len(f) == 0 {
		return "", nil
	}
	if n, err := strconv.ParseInt(f[len(f)-1], 10, 64); err == nil && len(f) > 1 {
		return f[0], &n
	}
	return f[0], nil
}
