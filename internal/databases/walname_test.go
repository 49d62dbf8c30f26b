package databases

import "testing"

func TestWALNames(t *testing.T) {
	for _, c := range []struct {
		lsn  string
		tli  uint32
		want string
	}{
		{"0/2000028", 1, "000000010000000000000002"},
		{"0/FFFFFFFF", 1, "0000000100000000000000FF"},
		{"1/0", 3, "000000030000000100000000"},
		{"16/B374D848", 2, "0000000200000016000000B3"},
	} {
		lsn, err := parseLSN(c.lsn)
		if err != nil {
			t.Fatal(err)
		}
		if got := walFileName(c.tli, lsn); got != c.want {
			t.Errorf("walFileName(%d, %s) = %s, want %s", c.tli, c.lsn, got, c.want)
		}
		if formatLSN(lsn) != c.lsn {
			t.Errorf("formatLSN(parseLSN(%s)) = %s", c.lsn, formatLSN(lsn))
		}
	}
	if end, ok := walSegmentEnd("0000000100000000000000FF"); !ok || formatLSN(end) != "1/0" {
		t.Errorf("end of segment 0/FF: %s %v", formatLSN(end), ok)
	}
	for name, want := range map[string]bool{"000000010000000000000002": true, "00000002.history": true,
		"000000010000000000000002.partial": false, "../etc/passwd": false, "00000001000000000000000g": false} {
		if isWALFile(name) != want {
			t.Errorf("isWALFile(%q) = %v", name, !want)
		}
	}
	if _, err := parseLSN("nope"); err == nil {
		t.Error("parseLSN accepted nope")
	}
}

func TestBasebackupPoints(t *testing.T) {
	stderr := "pg_basebackup: initiating base backup, waiting for checkpoint to complete\n" +
		"pg_basebackup: checkpoint completed\n" +
		"pg_basebackup: write-ahead log start point: 0/6000028 on timeline 1\n" +
		"pg_basebackup: write-ahead log end point: 0/6000120\n" +
		"pg_basebackup: base backup completed\n"
	start, tli, end, err := basebackupPoints(stderr)
	if err != nil || start != "0/6000028" || tli != 1 || end != "0/6000120" {
		t.Fatalf("got %s %d %s %v", start, tli, end, err)
	}
	if _, _, _, err := basebackupPoints("pg_basebackup: error: connection failed"); err == nil {
		t.Fatal("a failed run's report parsed")
	}
}
