package pandastack

import "testing"

func TestParseOnExpiry(t *testing.T) {
	for _, c := range []struct {
		in   string
		want OnExpiry
		ok   bool
	}{
		{"", "", true},
		{"kill", "", true},
		{"hibernate", OnExpiryHibernate, true},
		{"pause", "", false},
		{"Hibernate", "", false},
	} {
		got, err := ParseOnExpiry(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseOnExpiry(%q) = %q, %v", c.in, got, err)
		}
		if err != nil && ErrorCode(err) != EInvalid {
			t.Errorf("ParseOnExpiry(%q): code %s, want invalid", c.in, ErrorCode(err))
		}
	}
	if !OnExpiryHibernate.Hibernates() || OnExpiry("").Hibernates() {
		t.Error("Hibernates")
	}
}
