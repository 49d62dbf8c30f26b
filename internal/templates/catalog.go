// Package templates builds and bakes the guest images sandboxes are restored
// from. A build is layered, each layer cached on disk under a key of its
// inputs: the Debian kernel package, the debootstrapped root filesystem, the
// ext4 image with the guest agent, the initramfs, and finally the bake — a
// cold boot until the agent answers, then the VM's RAM file and device state
// saved as the template's snapshot. A second build of unchanged inputs does no
// work; an interrupted build leaves no half layer behind.
package templates

import (
	"context"
	"io"

	"github.com/pandastack/pandastack/internal/guestconn"
	"github.com/pandastack/pandastack/internal/guestimage"
)

// Def is a template's recipe.
type Def struct {
	Name      string
	Rootfs    guestimage.RootfsSpec
	CPUs      int
	MemoryMiB int
	DiskMiB   int // 0: sized to the content plus 1 GiB free
	// Warm runs in the guest before the bake, so what it reads is in the
	// snapshot's page cache. Daemons it leaves running (detached from its
	// output) keep running in every sandbox restored from the bake.
	Warm string
	// Prepare, when set, runs in the guest before Warm and the bake (a
	// custom template's START and READY).
	Prepare func(ctx context.Context, cl *guestconn.Client, progress io.Writer) error
	// Steps are shell commands run as root, in order, inside a build VM
	// booted from the disk image (after Files are written), with network
	// egress under the default policy and the server's extra CA
	// certificates trusted while they run; the disk they leave is the
	// template's image. Whatever fetches or runs a package manager's code
	// (an npm install and its install scripts) goes here, never in
	// Rootfs.Run (a host chroot). Pin versions: the commands, not what they
	// fetch, are the key.
	Steps []string
	// Files are written into the disk image (guest path → content) after
	// the root filesystem is built: changing one redoes the image and the
	// bake, not the debootstrap.
	Files map[string][]byte
}

// DebianMirror is where guest root filesystems come from.
const DebianMirror = "http://deb.debian.org/debian"

// Catalog lists the templates this version knows how to build.
var Catalog = map[string]Def{
	"base": {
		Name: "base",
		Rootfs: guestimage.RootfsSpec{Suite: "trixie", Mirror: DebianMirror, Packages: []string{
			"python3", "python-is-python3", "python3-pip", "python3-venv", "nodejs", "npm", "git", "curl", "ca-certificates",
			"build-essential", "golang-go", "procps", "iproute2", "less", "nano", "unzip", "xz-utils",
		}},
		CPUs: 1, MemoryMiB: 512,
		Warm: "python3 -c 'import json, os, sys' && node -e 0 && sh -c true",
	},
	// code-interpreter adds Python's scientific stack from Debian and the
	// code kernel behind run_code, already running in the bake.
	"code-interpreter": codeInterpreter,
	// minimal is the smallest useful guest: a shell and python3. Tests and
	// quick experiments use it; it builds in about a minute.
	"minimal": {
		Name: "minimal",
		Rootfs: guestimage.RootfsSpec{Suite: "trixie", Mirror: DebianMirror, Packages: []string{
			"python3-minimal", "procps",
		}},
		CPUs: 1, MemoryMiB: 512,
		Warm: "python3 -c 'import os' && sh -c true",
	},
}

// Modules are the kernel modules every guest loads from its initramfs:
// quota_v2 is the format of ext4's own quota files, without which a volume
// with quotas (hostagent) does not mount; virtio_balloon reports the pages
// the guest frees (vmm.Machine.FreePageReporting).
var Modules = []string{"virtio_mmio", "virtio_blk", "virtio_console", "virtio_net", "virtio_rng", "virtio_balloon", "quota_v2"}
