package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// sqlResult is an answer of POST /sql (Neon's wire, array mode): a
// result, a batch's results, or an error's message and code.
type sqlResult struct {
	Command    string `json:"command"`
	RowCount   *int   `json:"rowCount"`
	RowAsArray bool   `json:"rowAsArray"`
	Fields     []struct {
		Name       string `json:"name"`
		DataTypeID int    `json:"dataTypeID"`
	} `json:"fields"`
	Rows    [][]*string `json:"rows"`
	Results []sqlResult `json:"results"`
	Message string      `json:"message"`
	Code    string      `json:"code"`
}

// sqlPost sends body to the SQL-over-HTTP endpoint url with connection
// string uri, as the stock driver does (raw text, array mode).
func sqlPost(t *testing.T, url, uri string, headers map[string]string, body string) (int, sqlResult) {
	t.Helper()
	status, r, err := sqlSend(url, uri, headers, body)
	if err != nil {
		t.Fatal(err)
	}
	return status, r
}

// sqlSend is sqlPost for any goroutine.
func sqlSend(url, uri string, headers map[string]string, body string) (int, sqlResult, error) {
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		return 0, sqlResult{}, err
	}
	req.Header.Set("Neon-Connection-String", uri)
	req.Header.Set("Neon-Raw-Text-Output", "true")
	req.Header.Set("Neon-Array-Mode", "true")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, sqlResult{}, err
	}
	defer resp.Body.Close()
	var r sqlResult
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return resp.StatusCode, r, fmt.Errorf("decode: %w", err)
	}
	return resp.StatusCode, r, nil
}

// cell is row i, column j of r ("" for NULL or none).
func (r sqlResult) cell(i, j int) string {
	if i >= len(r.Rows) || j >= len(r.Rows[i]) || r.Rows[i][j] == nil {
		return ""
	}
	return *r.Rows[i][j]
}

// checkSQLSessionsReset: sessions are pooled, yet what one request leaves
// in its session — a setting, a temporary table, a prepared statement — is
// gone for the next request on that same session (its backend pid). The
// state is set once; later requests look for it until one lands on the
// session that held it.
func checkSQLSessionsReset(t *testing.T, d *sdk.Database) {
	t.Helper()
	status, r := sqlPost(t, d.HTTPURL, d.ConnectionURI, nil, `{"queries": [
		{"query": "create temp table leak_t (x int)"}, {"query": "insert into leak_t values (1)"},
		{"query": "select set_config('app.who', 'alice', false)"}, {"query": "prepare leak_p as select 1"},
		{"query": "select pg_backend_pid()::text"}]}`)
	if status != 200 || len(r.Results) != 5 {
		t.Fatalf("set session state: %d %+v", status, r)
	}
	pid := r.Results[4].cell(0, 0)
	for try := 1; ; try++ {
		status, r := sqlPost(t, d.HTTPURL, d.ConnectionURI, nil, `{"queries": [{"query": "select pg_backend_pid()::text"},
			{"query": "select coalesce(current_setting('app.who', true), '')"}, {"query": "select (to_regclass('leak_t') is null)::text"},
			{"query": "select count(*)::text from pg_prepared_statements where name = 'leak_p'"}]}`)
		if status != 200 || len(r.Results) != 4 {
			t.Fatalf("read session state: %d %+v", status, r)
		}
		if who, noTable, prepared := r.Results[1].cell(0, 0), r.Results[2].cell(0, 0), r.Results[3].cell(0, 0); who != "" || noTable != "true" || prepared != "0" {
			t.Fatalf("a later request (pid %s; the state was set on %s) saw setting %q, no temp table %s, %s prepared statements",
				r.Results[0].cell(0, 0), pid, who, noTable, prepared)
		}
		if r.Results[0].cell(0, 0) == pid {
			t.Logf("request %d after reused session %s, reset", try, pid)
			return
		}
		if try == 10 {
			t.Fatalf("10 requests never reused session %s: no pooling", pid)
		}
	}
}

// checkSQLSessionCap: more requests at once than a database's pool holds
// all answer, on at most sqlhttp.PoolConns sessions.
func checkSQLSessionCap(t *testing.T, d *sdk.Database) {
	t.Helper()
	const n, maxSessions = 8, 4 // sqlhttp.PoolConns
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			if status, r, err := sqlSend(d.HTTPURL, d.ConnectionURI, nil, `{"query": "select pg_sleep(0.3)"}`); err != nil || status != 200 {
				errs <- fmt.Errorf("%d %+v %v", status, r, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("a request of %d at once: %v", n, err)
	}
	_, r := sqlPost(t, d.HTTPURL, d.ConnectionURI, nil, `{"query": "select count(*)::text from pg_stat_activity where application_name = 'sql-over-http'"}`)
	if got, err := strconv.Atoi(r.cell(0, 0)); err != nil || got < 1 || got > maxSessions {
		t.Fatalf("%s SQL-over-HTTP sessions after %d requests at once, want at most %d", r.cell(0, 0), n, maxSessions)
	}
}

// checkSQLAfterFork: over HTTP a fork answers to its own password only
// (the parent's, pooled for the parent, opens nothing there), and the
// parent's pooled sessions still answer after the fork.
func checkSQLAfterFork(t *testing.T, parent, fork *sdk.Database) {
	t.Helper()
	if status, r := sqlPost(t, fork.HTTPURL, fork.ConnectionURI, nil, `{"query": "select count(*) from forked"}`); status != 200 || r.cell(0, 0) != "4" {
		t.Fatalf("the fork over http: %d %+v", status, r)
	}
	withParents := strings.Replace(fork.ConnectionURI, fork.Password, parent.Password, 1)
	if status, r := sqlPost(t, fork.HTTPURL, withParents, nil, `{"query": "select 1"}`); status != 400 || r.Code != "28P01" {
		t.Fatalf("the parent's password on the fork over http: %d %+v", status, r)
	}
	if status, r := sqlPost(t, parent.HTTPURL, parent.ConnectionURI, nil, `{"query": "select count(*) from forked"}`); status != 200 || r.cell(0, 0) != "3" {
		t.Fatalf("the parent over http after the fork: %d %+v", status, r)
	}
}
