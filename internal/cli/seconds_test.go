package cli

import "testing"

func TestSecondsFlag(t *testing.T) {
	tests := []struct {
		in      string
		want    int
		wantErr bool
	}{
		{"30", 30, false},
		{"0", 0, false},
		{"30s", 30, false},
		{"5m", 300, false},
		{"1h30m", 5400, false},
		{"-1", -1, false}, // the server says why it is wrong
		{"1.5s", 0, true},
		{"soon", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var f secondsFlag
			err := f.Set(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Set(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			}
			if err == nil && int(f) != tt.want {
				t.Fatalf("Set(%q) = %d, want %d", tt.in, f, tt.want)
			}
		})
	}
}
