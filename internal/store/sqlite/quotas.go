package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/pandastack/pandastack"
)

// GetTeamQuotas returns the team's stored quota overrides.
func (s *Store) GetTeamQuotas(ctx context.Context, teamID string) (pandastack.TeamQuotas, error) {
	q := pandastack.TeamQuotas{TeamID: teamID}
	o := &q.Overrides
	var maxSb, maxSvc, maxSnap, maxVol, maxBuilds, maxCPU, maxMem, burst, maxDisk sql.NullInt64
	var rps sql.NullFloat64
	var updated string
	err := s.r.QueryRowContext(ctx,
		`SELECT max_sandboxes, max_service_machines, max_snapshots, max_volumes, max_concurrent_builds,
		        max_vcpus, max_memory_mib, requests_per_second, burst, updated_at, max_disk_gib
		 FROM team_quotas WHERE team_id = ?`, teamID).
		Scan(&maxSb, &maxSvc, &maxSnap, &maxVol, &maxBuilds, &maxCPU, &maxMem, &rps, &burst, &updated, &maxDisk)
	if errors.Is(err, sql.ErrNoRows) {
		return q, notFound("team %s has no quota overrides", teamID)
	}
	if err != nil {
		return q, fmt.Errorf("get quotas of team %s: %w", teamID, err)
	}
	o.MaxSandboxes, o.MaxServiceMachines, o.MaxSnapshots = optInt(maxSb), optInt(maxSvc), optInt(maxSnap)
	o.MaxVolumes, o.MaxConcurrentBuilds, o.MaxVCPUs = optInt(maxVol), optInt(maxBuilds), optInt(maxCPU)
	o.MaxMemoryMiB, o.Burst, o.MaxDiskGiB = optInt(maxMem), optInt(burst), optInt(maxDisk)
	if rps.Valid {
		o.RequestsPerSecond = &rps.Float64
	}
	q.UpdatedAt, err = decodeTime("team quotas updated_at", updated)
	return q, err
}

// PutTeamQuotas stores (inserts or replaces) the team's quota overrides.
func (s *Store) PutTeamQuotas(ctx context.Context, q pandastack.TeamQuotas) error {
	if err := requireKey("team quotas", "team id", q.TeamID); err != nil {
		return err
	}
	updated, err := encodeTime("team quotas updated_at", q.UpdatedAt)
	if err != nil {
		return err
	}
	o := q.Overrides
	_, err = s.w.ExecContext(ctx,
		`INSERT INTO team_quotas (team_id, max_sandboxes, max_service_machines, max_snapshots, max_volumes,
		        max_concurrent_builds, max_vcpus, max_memory_mib, requests_per_second, burst, updated_at, max_disk_gib)
		 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		 ON CONFLICT (team_id) DO UPDATE SET
		        max_sandboxes = excluded.max_sandboxes, max_service_machines = excluded.max_service_machines,
		        max_snapshots = excluded.max_snapshots, max_volumes = excluded.max_volumes,
		        max_concurrent_builds = excluded.max_concurrent_builds, max_vcpus = excluded.max_vcpus,
		        max_memory_mib = excluded.max_memory_mib, requests_per_second = excluded.requests_per_second,
		        burst = excluded.burst, updated_at = excluded.updated_at, max_disk_gib = excluded.max_disk_gib`,
		q.TeamID, o.MaxSandboxes, o.MaxServiceMachines, o.MaxSnapshots, o.MaxVolumes,
		o.MaxConcurrentBuilds, o.MaxVCPUs, o.MaxMemoryMiB, o.RequestsPerSecond, o.Burst, updated, o.MaxDiskGiB)
	if isForeignKeyViolation(err) {
		return &pandastack.Error{Code: pandastack.ENotFound, Message: fmt.Sprintf("team %s not found", q.TeamID), Err: err}
	}
	if err != nil {
		return fmt.Errorf("put quotas of team %s: %w", q.TeamID, err)
	}
	return nil
}

func optInt(v sql.NullInt64) *int {
	if !v.Valid {
		return nil
	}
	n := int(v.Int64)
	return &n
}
