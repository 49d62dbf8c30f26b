package apps

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// MaxLogBytes bounds a deploy's kept log: past it the oldest output goes.
const MaxLogBytes = 1 << 20

// deployLog is a deploy's log while it runs: lines are appended with env
// values masked, and the newest MaxLogBytes are kept.
type deployLog struct {
	mu      sync.Mutex
	b       strings.Builder
	secrets []string
	start   time.Time
}

func newDeployLog(env map[string]string) *deployLog {
	l := &deployLog{start: time.Now()}
	for _, v := range env {
		// Short values would mask ordinary words.
		if len(v) >= 4 {
			l.secrets = append(l.secrets, v)
		}
	}
	// Longest first, so a value containing another is masked whole.
	sort.Slice(l.secrets, func(i, j int) bool { return len(l.secrets[i]) > len(l.secrets[j]) })
	return l
}

// Write appends output.
func (l *deployLog) Write(p []byte) (int, error) {
	l.add(string(p))
	return len(p), nil
}

// printf adds a line of the deploy's own, stamped with the time since
// the deploy began.
func (l *deployLog) printf(format string, args ...any) {
	l.add(fmt.Sprintf("[%6.1fs] ", time.Since(l.start).Seconds()) + fmt.Sprintf(format, args...) + "\n")
}

func (l *deployLog) add(s string) {
	for _, v := range l.secrets {
		s = strings.ReplaceAll(s, v, "[redacted]")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.WriteString(s)
	if l.b.Len() > MaxLogBytes {
		keep := l.b.String()[l.b.Len()-MaxLogBytes/2:]
		l.b.Reset()
		l.b.WriteString("[earlier output dropped]\n")
		l.b.WriteString(keep)
	}
}

func (l *deployLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
