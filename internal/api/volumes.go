package api

import (
	"net/http"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/quotas"
)

type createVolumeRequest struct {
	Name    string `json:"name"`
	SizeMiB int    `json:"size_mib"`
}

type volumeList struct {
	Volumes []pandastack.Volume `json:"volumes"`
}

// createVolume makes an empty, formatted durable volume.
func (s *Server) createVolume(w http.ResponseWriter, r *http.Request) error {
	var req createVolumeRequest
	if err := decodeJSON(w, r, &req); err != nil {
		return err
	}
	if req.Name == "" {
		return invalid("name is required")
	}
	if req.SizeMiB < pandastack.MinVolumeMiB || req.SizeMiB > pandastack.MaxVolumeMiB {
		return invalid("size_mib must be between %d and %d, got %d", pandastack.MinVolumeMiB, pandastack.MaxVolumeMiB, req.SizeMiB)
	}
	team := caller(r).team.ID
	release, err := s.quotas.Reserve(r.Context(), team, quotas.Usage{Volumes: 1, DiskMiB: req.SizeMiB})
	if err != nil {
		return err
	}
	defer release()
	v, err := s.cfg.Engine.CreateVolume(r.Context(), team, req.Name, req.SizeMiB)
	if err != nil {
		return wrap(err, "create volume")
	}
	writeJSON(w, http.StatusCreated, v)
	return nil
}

// ownVolume returns the {id} volume (an id or a name) if it belongs to the
// caller's team; another team's answers 404 like a missing one.
func (s *Server) ownVolume(r *http.Request) (pandastack.Volume, error) {
	ref, team := r.PathValue("id"), caller(r).team.ID
	v, err := s.cfg.Store.GetVolume(r.Context(), ref)
	if err != nil && pandastack.ErrorCode(err) == pandastack.ENotFound {
		v, err = s.cfg.Store.VolumeByName(r.Context(), team, ref)
	}
	if err != nil && pandastack.ErrorCode(err) != pandastack.ENotFound {
		return v, wrap(err, "get volume")
	}
	if err != nil || v.TeamID != team {
		return pandastack.Volume{}, pandastack.Errorf(pandastack.ENotFound, "volume %s not found", ref)
	}
	return v, nil
}

func (s *Server) listVolumes(w http.ResponseWriter, r *http.Request) error {
	list, err := s.cfg.Store.ListVolumes(r.Context(), caller(r).team.ID)
	if err != nil {
		return wrap(err, "list volumes")
	}
	writeJSON(w, http.StatusOK, volumeList{Volumes: list})
	return nil
}

func (s *Server) getVolume(w http.ResponseWriter, r *http.Request) error {
	v, err := s.ownVolume(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// deleteVolume removes a volume and its data; one attached to a live
// (running or hibernated) sandbox is refused with 409.
func (s *Server) deleteVolume(w http.ResponseWriter, r *http.Request) error {
	v, err := s.ownVolume(r)
	if err != nil {
		return err
	}
	if v.ManagedBy != "" {
		kind, id := pandastack.SplitManagedBy(v.ManagedBy)
		return pandastack.Errorf(pandastack.EConflict, "volume %s holds the data of %s %s: it goes when that %s is deleted (/v1/%ss/%s)", v.Name, kind, id, kind, kind, id)
	}
	if err := s.cfg.Engine.DeleteVolume(r.Context(), v.ID); err != nil {
		return wrap(err, "delete volume")
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
