package codeinterp_test

import (
	"bufio"
	"context"
	"net"
	"testing"
	"time"

	"github.com/pandastack/pandastack"
	"github.com/pandastack/pandastack/internal/codeinterp"
)

// scripted is a kernel that reads the request line and answers with fixed
// bytes, then hangs up: what a hostile program listening on the kernel's
// port inside a sandbox can send.
type scripted []byte

func (s scripted) DialPort(ctx context.Context, port int) (net.Conn, error) {
	host, kernel := net.Pipe()
	go func() {
		defer kernel.Close()
		if _, err := bufio.NewReader(kernel).ReadBytes('\n'); err != nil {
			return
		}
		_, _ = kernel.Write(s)
	}()
	return host, nil
}

// FuzzRun feeds arbitrary kernel output to a run and a contexts listing:
// both return (the kernel hanging up ends them), a run passes on only the
// documented event types with their payloads filled in, ends with "end"
// or an error, and its errors are unavailable, invalid or too large —
// never an internal error, whatever the guest sends.
func FuzzRun(f *testing.F) {
	for _, s := range []string{
		`{"type":"stdout","text":"1024\n"}` + "\n" + `{"type":"end","execution_count":1,"timed_out":false}` + "\n",
		`{"type":"result","text":"2","png":"iVBOR","is_main_result":true}` + "\n" + `{"type":"end"}` + "\n",
		`{"type":"error","name":"ZeroDivisionError","value":"division by zero","traceback":["a"]}` + "\n" + `{"type":"end"}` + "\n",
		`{"type":"error","name":"ProtocolError","value":"bad request"}` + "\n",
		`{"type":"contexts","contexts":[{"id":"default","execution_count":2}]}` + "\n",
		`{"type":"stdout","text":"no newline, no end"}`,
		"not json\n",
		`{"type":"mystery"}` + "\n",
	} {
		f.Add([]byte(s))
	}
	known := map[string]bool{"stdout": true, "stderr": true, "result": true, "error": true, "end": true}
	f.Fuzz(func(t *testing.T, out []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var last string
		err := codeinterp.Run(ctx, scripted(out), codeinterp.Request{Code: "print(1)"}, func(ev codeinterp.Event) error {
			if !known[ev.Type] || last == "end" {
				t.Fatalf("event %q after %q", ev.Type, last)
			}
			switch {
			case ev.Type == "result" && ev.Result == nil,
				ev.Type == "error" && (ev.Error == nil || ev.Error.Traceback == nil):
				t.Fatalf("%s event without its payload: %+v", ev.Type, ev)
			}
			last = ev.Type
			return nil
		})
		if ctx.Err() != nil {
			t.Fatal("run did not end when the kernel hung up")
		}
		if err == nil && last != "end" {
			t.Fatalf("run succeeded without an end event (last %q)", last)
		}
		if c := pandastack.ErrorCode(err); err != nil && c != pandastack.EUnavailable && c != pandastack.EInvalid && c != pandastack.EOutputTooLarge {
			t.Fatalf("run failed with %s: %v", c, err)
		}
		cs, err := codeinterp.Contexts(ctx, scripted(out))
		if err != nil {
			if c := pandastack.ErrorCode(err); c != pandastack.EUnavailable {
				t.Fatalf("contexts failed with %s: %v", c, err)
			}
		} else if cs == nil {
			t.Fatal("contexts: nil list, want empty")
		}
	})
}
