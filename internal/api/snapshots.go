package api

import (
	"net/http"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/quotas"
)

type snapshotRequest struct {
	Name string `json:"name"`
}

type snapshotList struct {
	Snapshots []pandastack.Snapshot `json:"snapshots"`
}

// snapshot saves a running sandbox; it runs on.
func (s *Server) snapshot(w http.ResponseWriter, r *http.Request) error {
	var req snapshotRequest
	if r.ContentLength != 0 {
		if err := decodeJSON(w, r, &req); err != nil {
			return err
		}
	}
	if req.Name != "" {
		if err := checkName("snapshot name", req.Name); err != nil {
			return err
		}
	}
	sb, err := s.liveSandbox(r)
	if err != nil {
		return err
	}
	// A snapshot keeps the sandbox's memory and disk as they are now (its
	// bytes, measured at save, count from then on).
	release, err := s.quotas.Reserve(r.Context(), sb.TeamID, quotas.Usage{Snapshots: 1, DiskMiB: sb.MemoryMiB + sb.DiskMiB})
	if err != nil {
		return err
	}
	defer release()
	sn, err := s.cfg.Engine.Snapshot(r.Context(), sb.ID, req.Name)
	if err != nil {
		return wrap(err, "snapshot sandbox")
	}
	writeJSON(w, http.StatusCreated, sn)
	return nil
}

// ownSnapshot returns the {id} snapshot if it belongs to the caller's team;
// another team's answers 404 like a missing one.
func (s *Server) ownSnapshot(r *http.Request) (pandastack.Snapshot, error) {
	sn, err := s.cfg.Store.GetSnapshot(r.Context(), r.PathValue("id"))
	if err != nil || sn.TeamID != caller(r).team.ID {
		return pandastack.Snapshot{}, pandastack.Errorf(pandastack.ENotFound, "snapshot %s not found", r.PathValue("id"))
	}
	return sn, nil
}

func (s *Server) listSnapshots(w http.ResponseWriter, r *http.Request) error {
	list, err := s.cfg.Store.ListSnapshots(r.Context(), caller(r).team.ID)
	if err != nil {
		return wrap(err, "list snapshots")
	}
	writeJSON(w, http.StatusOK, snapshotList{Snapshots: list})
	return nil
}

func (s *Server) getSnapshot(w http.ResponseWriter, r *http.Request) error {
	sn, err := s.ownSnapshot(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sn)
	return nil
}

func (s *Server) deleteSnapshot(w http.ResponseWriter, r *http.Request) error {
	sn, err := s.ownSnapshot(r)
	if err != nil {
		return err
	}
	if err := s.cfg.Engine.DeleteSnapshot(r.Context(), sn.ID); err != nil {
		return wrap(err, "delete snapshot")
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
