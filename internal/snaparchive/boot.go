package snaparchive

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/objstore"
)

// machineFile is the saved VM's machine description (vmm.WriteMachine);
// its "kernel" and "initrd" fields are paths on the host that saved it.
const machineFile = "machine.json"

var bootRoles = []string{"kernel", "initrd"}

func readMachine(dir string) (map[string]any, error) {
	b, err := os.ReadFile(filepath.Join(dir, machineFile))
	if err != nil {
		return nil, fmt.Errorf("read machine: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("read machine: %w", err)
	}
	return m, nil
}

func hashFile(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	return hex.EncodeToString(h.Sum(nil)), n, err
}

// putBoot stores the machine's kernel and initrd by content, unless the
// store has them already.
func (a *Archive) putBoot(ctx context.Context, dir string) ([]Boot, error) {
	m, err := readMachine(dir)
	if err != nil {
		return nil, err
	}
	var out []Boot
	for _, role := range bootRoles {
		p, _ := m[role].(string)
		if p == "" {
			continue
		}
		sum, size, err := hashFile(p)
		if err != nil {
			return nil, fmt.Errorf("export the %s: %w", role, err)
		}
		key := blobsPrefix + sum
		if info, err := a.cfg.Objects.Stat(ctx, key); err != nil || info.Size != size {
			f, err := os.Open(p)
			if err != nil {
				return nil, fmt.Errorf("export the %s: %w", role, err)
			}
			err = a.cfg.Objects.Put(ctx, key, f)
			f.Close()
			if err != nil {
				return nil, fmt.Errorf("export the %s: %w", role, err)
			}
		}
		out = append(out, Boot{Role: role, Name: filepath.Base(p), Size: size, SHA256: sum})
	}
	return out, nil
}

// fetchBoot makes the machine in dir name boot files this host has: the
// same path when it holds the same bytes, else a copy fetched into
// BootDir/SHA256/NAME.
func (a *Archive) fetchBoot(ctx context.Context, man *Manifest, dir string) error {
	if len(man.Boot) == 0 {
		return nil
	}
	m, err := readMachine(dir)
	if err != nil {
		return err
	}
	changed := false
	for _, b := range man.Boot {
		p, _ := m[b.Role].(string)
		if sum, _, err := hashFile(p); err == nil && sum == b.SHA256 {
			continue
		}
		local, err := a.fetchBlob(ctx, b)
		if err != nil {
			return err
		}
		m[b.Role] = local
		changed = true
	}
	if !changed {
		return nil
	}
	out, _ := json.Marshal(m)
	if err := os.WriteFile(filepath.Join(dir, machineFile), out, 0o600); err != nil {
		return fmt.Errorf("record machine: %w", err)
	}
	return nil
}

// fetchBlob fetches a boot file into BootDir (once), verified.
func (a *Archive) fetchBlob(ctx context.Context, b Boot) (string, error) {
	if a.cfg.BootDir == "" {
		return "", pandastack.Errorf(pandastack.EUnavailable, "this host lacks the snapshot's %s %s and has no directory to fetch it into", b.Role, b.Name)
	}
	if len(b.SHA256) != 64 || b.Name == "" || b.Name != filepath.Base(b.Name) || b.Name == ".." {
		return "", pandastack.Errorf(pandastack.EInvalid, "the manifest names a bad %s", b.Role)
	}
	if _, err := hex.DecodeString(b.SHA256); err != nil {
		return "", pandastack.Errorf(pandastack.EInvalid, "the manifest names a bad %s", b.Role)
	}
	dir := filepath.Join(a.cfg.BootDir, b.SHA256)
	path := filepath.Join(dir, b.Name)
	if sum, _, err := hashFile(path); err == nil && sum == b.SHA256 {
		return path, nil
	}
	// Readable by the VMs' unprivileged uids, like the build cache.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("fetch %s: %w", b.Role, err)
	}
	_ = os.Chmod(a.cfg.BootDir, 0o755)
	_ = os.Chmod(dir, 0o755)
	key := blobsPrefix + b.SHA256
	rc, err := a.cfg.Objects.Get(ctx, key)
	if objstore.IsNotFound(err) {
		return "", brokenExport(key, "the "+b.Role+" is missing", err)
	}
	if err != nil {
		return "", &pandastack.Error{Code: pandastack.EUnavailable, Message: "could not read the snapshot's " + b.Role + " from the object store", Err: err}
	}
	defer rc.Close()
	tmp, err := os.CreateTemp(dir, ".fetch-*")
	if err != nil {
		return "", fmt.Errorf("fetch %s: %w", b.Role, err)
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), rc)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", &pandastack.Error{Code: pandastack.EUnavailable, Message: "could not read the snapshot's " + b.Role + " from the object store", Err: err}
	}
	if n != b.Size || hex.EncodeToString(h.Sum(nil)) != b.SHA256 {
		return "", brokenExport(key, "the "+b.Role+" does not match its checksum", fmt.Errorf("%d bytes, sha256 %x", n, h.Sum(nil)))
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return "", err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", fmt.Errorf("fetch %s: %w", b.Role, err)
	}
	return path, nil
}
