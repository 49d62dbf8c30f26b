package snaparchive

import (
	"time"

	"github.com/pandastack/pandastack"
)

// Object layout in the store:
//
//	snapshots/ID/files/NAME     one per file of the snapshot's directory (sparse encoding)
//	snapshots/ID/manifest.json  written last: an export without it is unfinished
//	blobs/sha256/HEX            kernels and initrds, by content, shared by every export
//
// The key of an export (what import takes) is "snapshots/ID".
const (
	snapshotsPrefix = "snapshots/"
	manifestName    = "manifest.json"
	filesDir        = "files/"
	blobsPrefix     = "blobs/sha256/"
)

// formatVersion is the manifest format this code writes and reads.
const formatVersion = 1

// maxManifest bounds a manifest read from the store.
const maxManifest = 1 << 20

// Manifest describes one export: the snapshot's record, and for every file
// its size and the SHA-256 of the object it travels in (the sparse
// encoding, which is checked as it is read back).
type Manifest struct {
	Format     int                 `json:"format"`
	Snapshot   pandastack.Snapshot `json:"snapshot"`
	ExportedAt time.Time           `json:"exported_at"`
	Files      []File              `json:"files"`
	// Boot are the kernel and initrd the snapshot's machine boots with:
	// not in the snapshot's directory but in the build cache, stored once
	// by content (blobs/sha256/HEX).
	Boot []Boot `json:"boot"`
}

// File is one file of the snapshot's directory.
type File struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`   // the file's size (holes included)
	Stored int64  `json:"stored"` // the object's size
	SHA256 string `json:"sha256"` // of the object
	// Encoding is how the object holds the file: "sparse+zstd" (the
	// sparse encoding, zstd-compressed) or "sparse".
	Encoding string `json:"encoding"`
}

// Encodings of a file's object.
const (
	encodingSparse     = "sparse"
	encodingSparseZstd = "sparse+zstd"
)

// Boot is a kernel or initrd the snapshot's machine names.
type Boot struct {
	Role   string `json:"role"` // "kernel" or "initrd" (the field of machine.json)
	Name   string `json:"name"` // its base name
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"` // of the file, which is also the object
}
