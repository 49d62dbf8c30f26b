// Package guestimage builds the parts of a pandastack guest VM image from
// Debian packages: the kernel and its modules (unpacked from the Debian cloud
// kernel package), an initramfs holding the guest agent as /init plus the
// modules it must load, a Debian root filesystem made with debootstrap and
// apt-get, and the ext4 disk image made from that root filesystem.
//
// Everything slow is cached under a caller-chosen cache directory, keyed by
// what went into it (the kernel package file name, the hash of a RootfsSpec),
// and every cache entry is built in a temporary directory and renamed into
// place, so an interrupted run never leaves a half-built entry behind.
//
// The functions that build things run Debian tools (apt-get, dpkg,
// debootstrap, chroot, mkfs.ext4, debugfs) and need root.
package guestimage
