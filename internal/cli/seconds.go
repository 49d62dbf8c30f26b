package cli

import (
	"fmt"
	"strconv"
	"time"
)

// secondsFlag is a whole number of seconds given either as a bare number
// ("30") or as a Go duration ("30s", "5m", "1h30m").
type secondsFlag int

func (f *secondsFlag) String() string { return strconv.Itoa(int(*f)) }

func (f *secondsFlag) Set(v string) error {
	if n, err := strconv.Atoi(v); err == nil {
		*f = secondsFlag(n)
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return fmt.Errorf("want seconds (30) or a duration (30s, 5m), got %q", v)
	}
	if d%time.Second != 0 {
		return fmt.Errorf("want whole seconds, got %q", v)
	}
	*f = secondsFlag(d / time.Second)
	return nil
}
