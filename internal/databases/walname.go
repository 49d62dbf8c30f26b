package databases

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// walSegmentSize is PostgreSQL's default WAL segment, which the template
// keeps: 16 MiB, 256 segments per 4 GiB "log id".
const walSegmentSize = 16 << 20

// parseLSN reads a PostgreSQL LSN, "HI/LO" in hex.
func parseLSN(s string) (uint64, error) {
	hi, lo, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return 0, fmt.Errorf("lsn %q: want HI/LO", s)
	}
	h, err := strconv.ParseUint(hi, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("lsn %q: %w", s, err)
	}
	l, err := strconv.ParseUint(lo, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("lsn %q: %w", s, err)
	}
	return h<<32 | l, nil
}

// formatLSN writes an LSN as PostgreSQL does.
func formatLSN(lsn uint64) string { return fmt.Sprintf("%X/%X", lsn>>32, lsn&0xffffffff) }

// walFileName is the name of the segment lsn is in, on timeline tli
// (PostgreSQL's XLogFileName).
func walFileName(tli uint32, lsn uint64) string {
	seg := lsn / walSegmentSize
	per := uint64(0x100000000 / walSegmentSize)
	return fmt.Sprintf("%08X%08X%08X", tli, seg/per, seg%per)
}

// walSegmentRE is a WAL segment's file name: timeline, log id, segment.
var walSegmentRE = regexp.MustCompile(`^[0-9A-F]{24}$`)

// walHistoryRE is a timeline history file's name.
var walHistoryRE = regexp.MustCompile(`^[0-9A-F]{8}\.history$`)

// isWALFile reports whether name is a complete file of the WAL archive
// (not pg_receivewal's .partial one being written).
func isWALFile(name string) bool {
	return walSegmentRE.MatchString(name) || walHistoryRE.MatchString(name)
}

// walSegmentEnd is the LSN just past segment name: what an archive whose
// newest segment is name holds all of.
func walSegmentEnd(name string) (uint64, bool) {
	n, ok := walSegmentNumber(name)
	return (n + 1) * walSegmentSize, ok
}

// walSegmentNumber is segment name's number on its timeline (log id and
// segment in one count).
func walSegmentNumber(name string) (uint64, bool) {
	if !walSegmentRE.MatchString(name) {
		return 0, false
	}
	hi, _ := strconv.ParseUint(name[8:16], 16, 32)
	lo, _ := strconv.ParseUint(name[16:24], 16, 32)
	return hi*uint64(0x100000000/walSegmentSize) + lo, true
}

// basebackupPoints reads pg_basebackup -v's report: the WAL start point,
// its timeline, and the end point.
var (
	startPointRE = regexp.MustCompile(`write-ahead log start point: ([0-9A-F]+/[0-9A-F]+) on timeline ([0-9]+)`)
	endPointRE   = regexp.MustCompile(`write-ahead log end point: ([0-9A-F]+/[0-9A-F]+)`)
)

func basebackupPoints(stderr string) (start string, tli uint32, end string, err error) {
	m := startPointRE.FindStringSubmatch(stderr)
	e := endPointRE.FindStringSubmatch(stderr)
	if m == nil || e == nil {
		return "", 0, "", fmt.Errorf("pg_basebackup reported no WAL start and end point")
	}
	t, err := strconv.ParseUint(m[2], 10, 32)
	if err != nil {
		return "", 0, "", fmt.Errorf("pg_basebackup timeline %q: %w", m[2], err)
	}
	return m[1], uint32(t), e[1], nil
}
