package e2bcompat

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/pandastack/pandastack"
)

// metric is E2B's SandboxMetric: sizes in bytes, CPU in percent of all the
// sandbox's vCPUs.
type metric struct {
	Timestamp     string  `json:"timestamp"`
	TimestampUnix int64   `json:"timestampUnix"`
	CPUCount      int     `json:"cpuCount"`
	CPUUsedPct    float64 `json:"cpuUsedPct"`
	MemUsed       int64   `json:"memUsed"`
	MemTotal      int64   `json:"memTotal"`
	MemCache      int64   `json:"memCache"`
	DiskUsed      int64   `json:"diskUsed"`
	DiskTotal     int64   `json:"diskTotal"`
}

// cpuWindow is how long the CPU use is measured over.
const cpuWindow = 200 * time.Millisecond

// metricsScript reads what a sample needs inside the guest, in one
// process: /proc/stat's cpu line twice, cpuWindow apart, the memory
// counters and the root filesystem's size.
var metricsScript = fmt.Sprintf(`read -r a < /proc/stat; sleep %.1f; read -r b < /proc/stat
echo "$a"; echo "$b"; cat /proc/meminfo; df -P -B1 /`, cpuWindow.Seconds())

// metrics: GET /sandboxes/{id}/metrics → SandboxMetric[]. E2B samples in
// the background and returns a window of the series; this server takes one
// sample now, from the guest, when it falls inside the window asked for
// (start and end, unix seconds, both optional) — a hibernated sandbox is
// not woken for it and has none.
func (s *Server) metrics(w http.ResponseWriter, r *http.Request, team string) error {
	sb, err := s.ownSandbox(r, team)
	if err != nil {
		return err
	}
	now := time.Now()
	for _, k := range []string{"start", "end"} {
		v := r.URL.Query().Get(k)
		if v == "" {
			continue
		}
		t, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return pandastack.Errorf(pandastack.EInvalid, "%s must be unix seconds, got %q", k, v)
		}
		if (k == "start" && now.Unix() < t) || (k == "end" && now.Unix() > t) {
			writeJSON(w, http.StatusOK, []metric{})
			return nil
		}
	}
	if sb.State == pandastack.StateHibernated {
		writeJSON(w, http.StatusOK, []metric{})
		return nil
	}
	m, err := s.sample(r.Context(), sb)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, []metric{m})
	return nil
}

func (s *Server) sample(ctx context.Context, sb pandastack.Sandbox) (metric, error) {
	g, err := s.cfg.Engine.Guest(ctx, sb.ID)
	if err != nil {
		return metric{}, err
	}
	var out bytes.Buffer
	res, err := g.Exec(ctx, pandastack.ExecRequest{Args: []string{"/bin/sh", "-c", metricsScript}, TimeoutSeconds: 10}, nil,
		func(ev pandastack.ExecEvent) error {
			if ev.Type == "stdout" && out.Len() < 64<<10 {
				out.Write(ev.Data)
			}
			return nil
		})
	if err != nil {
		return metric{}, fmt.Errorf("sample metrics of %s: %w", sb.ID, err)
	}
	if res.ExitCode != 0 {
		return metric{}, fmt.Errorf("sample metrics of %s: the guest's reading exited %d", sb.ID, res.ExitCode)
	}
	now := time.Now().UTC()
	m, err := parseSample(out.Bytes())
	if err != nil {
		return metric{}, fmt.Errorf("sample metrics of %s: %w", sb.ID, err)
	}
	m.Timestamp, m.TimestampUnix, m.CPUCount = now.Format(time.RFC3339), now.Unix(), sb.CPUs
	return m, nil
}

// parseSample reads metricsScript's output: two /proc/stat cpu lines,
// /proc/meminfo, then df -P -B1's two lines.
func parseSample(b []byte) (metric, error) {
	var m metric
	sc := bufio.NewScanner(bytes.NewReader(b))
	var cpu [2][]int64
	mem := map[string]int64{}
	for i := 0; sc.Scan(); i++ {
		f := strings.Fields(sc.Text())
		switch {
		case i < 2:
			if len(f) < 5 || f[0] != "cpu" {
				return m, fmt.Errorf("unexpected /proc/stat line %q", sc.Text())
			}
			for _, v := range f[1:] {
				n, _ := strconv.ParseInt(v, 10, 64)
				cpu[i] = append(cpu[i], n)
			}
		case len(f) >= 2 && strings.HasSuffix(f[0], ":"):
			n, _ := strconv.ParseInt(f[1], 10, 64)
			mem[strings.TrimSuffix(f[0], ":")] = n << 10 // kB
		case len(f) >= 6 && strings.HasPrefix(f[5], "/"):
			m.DiskTotal, _ = strconv.ParseInt(f[1], 10, 64)
			m.DiskUsed, _ = strconv.ParseInt(f[2], 10, 64)
		}
	}
	if len(cpu[1]) == 0 || mem["MemTotal"] == 0 || m.DiskTotal == 0 {
		return m, fmt.Errorf("incomplete sample")
	}
	var total, idle int64
	for j := range cpu[1] {
		d := cpu[1][j] - cpu[0][j]
		total += d
		if j == 3 || j == 4 { // idle, iowait
			idle += d
		}
	}
	if total > 0 {
		m.CPUUsedPct = float64(total-idle) * 100 / float64(total)
	}
	m.MemTotal = mem["MemTotal"]
	m.MemUsed = m.MemTotal - mem["MemAvailable"]
	m.MemCache = mem["Cached"]
	return m, nil
}
