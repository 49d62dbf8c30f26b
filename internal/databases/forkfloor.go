package databases

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pandastack/pandastack"
)

// ForkFloor is what a fork of a database stands on, measured on the
// host for `pandastack bench --databases`: the engine's fork of its
// machine, as Fork makes it, and then the child's first session and
// query over its PostgreSQL port with the parent's password. What Fork
// adds — the route, the child's own password, the pooler's check — is
// not in it. Under TCG the first session is a new QEMU running
// PostgreSQL's connection code for the first time.
type ForkFloor struct {
	ForkMs       float64 `json:"fork_ms"`
	FirstQueryMs float64 `json:"first_query_ms"`
	TotalMs      float64 `json:"total_ms"`
}

// MeasureForkFloor forks running database id's machine, opens a session
// in the child and runs SELECT 1, then removes the child and its volume.
func (s *Service) MeasureForkFloor(ctx context.Context, id string) (ForkFloor, error) {
	var f ForkFloor
	if s.cfg.Forks == nil {
		return f, pandastack.Errorf(pandastack.EUnavailable, "this server does not fork databases")
	}
	d, err := s.cfg.Store.GetDatabase(ctx, id)
	if err != nil {
		return f, err
	}
	sb, err := s.cfg.Store.GetSandbox(ctx, d.MachineID)
	if err != nil {
		return f, fmt.Errorf("fork floor of database %s: its machine: %w", id, err)
	}
	if d.State != pandastack.DatabaseReady || sb.State != pandastack.StateRunning || d.VolumeID == "" {
		return f, pandastack.Errorf(pandastack.EConflict, "database %s is not running on a volume of its own (machine %s); connect to it first", id, sb.State)
	}
	password, err := s.password(d)
	if err != nil {
		return f, err
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "dbfloor-" + hex.EncodeToString(b[:]) // no database has it: nothing routes to the child
	t0 := time.Now()
	child, vols, err := s.cfg.Forks.ForkKeepingVolumes(ctx, d.MachineID, []string{name}, map[string]string{"pandastack.bench": "db-fork-floor"}, managedBy(name))
	if err != nil {
		return f, fmt.Errorf("fork floor of database %s: %w", id, err)
	}
	tFork := time.Since(t0)
	defer func() {
		ctx := context.WithoutCancel(ctx)
		if err := s.cfg.Engine.Kill(ctx, child.ID, pandastack.StateKilled); err != nil {
			s.log.Error("fork floor: remove the child", "sandbox", child.ID, "err", err)
		}
		for _, v := range vols {
			if err := s.cfg.Engine.DeleteVolume(ctx, v.ID); err != nil {
				s.log.Error("fork floor: remove the child's volume", "volume", v.ID, "err", err)
			}
		}
	}()
	cfg, err := pgx.ParseConfig("sslmode=disable")
	if err != nil {
		return f, err
	}
	cfg.User, cfg.Password, cfg.Database, cfg.Fallbacks = d.User, password, d.DBName, nil
	cfg.DialFunc = func(ctx context.Context, _, _ string) (net.Conn, error) {
		return s.cfg.Ports.Port(child.ID, Port).Dial(ctx)
	}
	cfg.ConnectTimeout = time.Minute
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return f, fmt.Errorf("fork floor of database %s: connect to the child: %w", id, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var one int
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		return f, fmt.Errorf("fork floor of database %s: query the child: %w", id, err)
	}
	total := time.Since(t0)
	f = ForkFloor{ForkMs: ms(tFork), FirstQueryMs: ms(total - tFork), TotalMs: ms(total)}
	s.log.Info("database fork floor", "database", id, "child", child.ID, "fork_ms", f.ForkMs, "first_query_ms", f.FirstQueryMs)
	return f, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
