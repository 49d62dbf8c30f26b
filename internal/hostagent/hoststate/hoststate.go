// Package hoststate keeps the host agent's own recovery records: one small
// JSON file per machine on the host, written when the machine starts,
// sleeps, wakes or changes its deadline, and removed when it ends. After a
// restart the host agent decides from these records alone which VMs are
// its machines (re-attach), which are leftovers (remove), and which
// machines lost their VM (report failed) — without asking the control
// plane's database, as a host on another machine will have to (nomad's
// client/state plays the same part).
package hoststate

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/pandastack/pandastack/internal/hostapi"
)

// Record is what the host keeps about one machine.
type Record struct {
	// Machine is the machine as the host runs it: id, lifetime, deadline
	// (ExpiresAt; zero for none), state (running or hibernated), its
	// volumes, and what its guest sessions need (env, template build).
	// (Records written before hostapi.Machine hold a sandbox record under
	// the same JSON names; its control-plane fields are ignored.)
	Machine hostapi.Machine `json:"machine"`
	// Volumes: durable volumes are attached (sync the guest before a kill).
	Volumes bool `json:"volumes,omitempty"`
}

// Dir holds the records, one file per machine.
type Dir struct{ path string }

// Open opens (creating it if needed) the records in dir. fresh reports
// that dir did not exist: a host upgraded from a version without records
// has none yet for the machines it runs.
func Open(dir string) (d *Dir, fresh bool, err error) {
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		fresh = true
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, false, fmt.Errorf("open host state: %w", err)
	}
	return &Dir{path: dir}, fresh, nil
}

func (d *Dir) file(id string) string { return filepath.Join(d.path, id+".json") }

// Put writes r, replacing the machine's record (write and rename: a crash
// leaves the old record or the new one, never half of one).
func (d *Dir) Put(r Record) error {
	id := r.Machine.ID
	if id == "" || id != filepath.Base(id) || strings.HasPrefix(id, ".") {
		return fmt.Errorf("host state: invalid machine id %q", id)
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("host state of %s: %w", id, err)
	}
	tmp := d.file(id) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("host state of %s: %w", id, err)
	}
	if err := os.Rename(tmp, d.file(id)); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("host state of %s: %w", id, err)
	}
	return nil
}

// Delete removes machine id's record; none is not an error.
func (d *Dir) Delete(id string) error {
	if err := os.Remove(d.file(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("host state of %s: %w", id, err)
	}
	return nil
}

// List returns every record, keyed by machine id. A record that cannot be
// read is skipped and named in the error (the rest are returned).
func (d *Dir) List() (map[string]Record, error) {
	ents, err := os.ReadDir(d.path)
	if err != nil {
		return nil, fmt.Errorf("list host state: %w", err)
	}
	out := map[string]Record{}
	var errs []error
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".json") {
			if strings.HasSuffix(n, ".tmp") {
				os.Remove(filepath.Join(d.path, n)) // a write a crash cut short
			}
			continue
		}
		b, err := os.ReadFile(filepath.Join(d.path, n))
		var r Record
		if err == nil {
			err = json.Unmarshal(b, &r)
		}
		if err != nil || r.Machine.ID != strings.TrimSuffix(n, ".json") {
			errs = append(errs, fmt.Errorf("host state %s: unreadable (%v)", n, err))
			continue
		}
		out[r.Machine.ID] = r
	}
	return out, errors.Join(errs...)
}
