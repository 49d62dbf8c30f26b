package qemu

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// qmp is a client of QEMU's machine protocol: JSON commands and replies,
// with asynchronous events.
type qmp struct {
	conn    *net.UnixConn
	wmu     sync.Mutex
	mu      sync.Mutex
	pending map[string]chan qmpReply
	seq     int
	events  chan qmpEvent
	done    chan struct{}
	err     error
}

type qmpReply struct {
	Return json.RawMessage `json:"return"`
	Error  *struct {
		Class string `json:"class"`
		Desc  string `json:"desc"`
	} `json:"error"`
	ID    string          `json:"id"`
	Event string          `json:"event"`
	Data  json.RawMessage `json:"data"`
}

type qmpEvent struct {
	Name string
	Data json.RawMessage
}

// dialQMP connects to a QMP socket, retrying until QEMU has created it.
func dialQMP(ctx context.Context, path string, exited <-chan struct{}) (*qmp, error) {
	var c net.Conn
	var err error
	for {
		c, err = net.Dial("unix", path)
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("connect qmp: %w (last error: %v)", ctx.Err(), err)
		case <-exited:
			return nil, fmt.Errorf("connect qmp: qemu exited")
		case <-time.After(time.Millisecond):
		}
	}
	q := &qmp{conn: c.(*net.UnixConn), pending: map[string]chan qmpReply{}, events: make(chan qmpEvent, 64), done: make(chan struct{})}
	r := bufio.NewReader(c)
	// QEMU serves one QMP client at a time: a greeting that does not come
	// means another process holds the monitor.
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = r.ReadBytes('\n') // greeting
	_ = c.SetReadDeadline(time.Time{})
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("read qmp greeting: %w", err)
	}
	go q.readLoop(r)
	if err := q.run(ctx, "qmp_capabilities", nil, nil); err != nil {
		q.close()
		return nil, err
	}
	return q, nil
}

func (q *qmp) readLoop(r *bufio.Reader) {
	defer close(q.done)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			q.mu.Lock()
			q.err = err
			for id, ch := range q.pending {
				close(ch)
				delete(q.pending, id)
			}
			q.mu.Unlock()
			return
		}
		var rep qmpReply
		if json.Unmarshal(line, &rep) != nil {
			continue
		}
		if rep.Event != "" {
			select {
			case q.events <- qmpEvent{rep.Event, rep.Data}:
			default: // nobody listening: drop
			}
			continue
		}
		q.mu.Lock()
		ch := q.pending[rep.ID]
		delete(q.pending, rep.ID)
		q.mu.Unlock()
		if ch != nil {
			ch <- rep
		}
	}
}

// run executes a command; out, if not nil, receives the "return" value.
func (q *qmp) run(ctx context.Context, cmd string, args any, out any) error {
	return q.runFD(ctx, cmd, args, out, -1)
}

// runFD executes a command, passing fd along with it (for getfd).
func (q *qmp) runFD(ctx context.Context, cmd string, args any, out any, fd int) error {
	q.mu.Lock()
	q.seq++
	id := fmt.Sprint(q.seq)
	ch := make(chan qmpReply, 1)
	q.pending[id] = ch
	q.mu.Unlock()
	msg := map[string]any{"execute": cmd, "id": id}
	if args != nil {
		msg["arguments"] = args
	}
	b, _ := json.Marshal(msg)
	q.wmu.Lock()
	var err error
	if fd >= 0 {
		_, _, err = q.conn.WriteMsgUnix(b, unix.UnixRights(fd), nil)
	} else {
		_, err = q.conn.Write(b)
	}
	q.wmu.Unlock()
	if err != nil {
		return fmt.Errorf("qmp %s: %w", cmd, err)
	}
	select {
	case rep, ok := <-ch:
		if !ok {
			return fmt.Errorf("qmp %s: connection closed", cmd)
		}
		if rep.Error != nil {
			return fmt.Errorf("qmp %s: %s: %s", cmd, rep.Error.Class, rep.Error.Desc)
		}
		if out != nil {
			return json.Unmarshal(rep.Return, out)
		}
		return nil
	case <-ctx.Done():
		q.mu.Lock()
		delete(q.pending, id)
		q.mu.Unlock()
		return fmt.Errorf("qmp %s: %w", cmd, ctx.Err())
	}
}

func (q *qmp) close() { q.conn.Close() }
