package api

import (
	"context"
	"net/http"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/quotas"
)

// SnapshotArchive keeps snapshots in object storage (internal/snaparchive).
type SnapshotArchive interface {
	// Export streams a snapshot to object storage (once) and returns its
	// record with object_key and exported_at set.
	Export(ctx context.Context, snapshotID string) (pandastack.Snapshot, error)
	// Import fetches the export at key, verifies it and records it as a
	// snapshot of teamID (named name, or as exported when ""). Another
	// team's export is not found unless anyTeam.
	Import(ctx context.Context, teamID string, anyTeam bool, key, name string) (pandastack.Snapshot, error)
}

var errNoArchive = pandastack.Errorf(pandastack.EUnavailable, "this server has no object storage configured")

// exportSnapshot: POST /v1/snapshots/{id}/export. It answers when the
// export is whole in object storage.
func (s *Server) exportSnapshot(w http.ResponseWriter, r *http.Request) error {
	sn, err := s.ownSnapshot(r)
	if err != nil {
		return err
	}
	if s.cfg.Archive == nil {
		return errNoArchive
	}
	sn, err = s.cfg.Archive.Export(r.Context(), sn.ID)
	if err != nil {
		return wrap(err, "export snapshot")
	}
	writeJSON(w, http.StatusOK, sn)
	return nil
}

type importRequest struct {
	ObjectKey string `json:"object_key"`
	Name      string `json:"name"`
}

// importSnapshot: POST /v1/snapshots {"object_key": "snapshots/snap_…"}
// makes a snapshot of the caller's team from an export of that team; an
// admin key may import any export (another server's teams differ).
func (s *Server) importSnapshot(w http.ResponseWriter, r *http.Request) error {
	var req importRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	if req.ObjectKey == "" {
		return invalid("object_key is required: the key of an export (snapshots/ID)")
	}
	if req.Name != "" {
		if err := checkName("snapshot name", req.Name); err != nil {
			return err
		}
	}
	if s.cfg.Archive == nil {
		return errNoArchive
	}
	// An import is a new snapshot: counted, and refused at the storage
	// reserve (its size is known only once it is fetched: it counts
	// against max_disk_gib from then on).
	release, err := s.quotas.Reserve(r.Context(), caller(r).team.ID, quotas.Usage{Snapshots: 1})
	if err != nil {
		return err
	}
	defer release()
	sn, err := s.cfg.Archive.Import(r.Context(), caller(r).team.ID, caller(r).key.Admin, req.ObjectKey, req.Name)
	if err != nil {
		return wrap(err, "import snapshot")
	}
	writeJSON(w, http.StatusCreated, sn)
	return nil
}
