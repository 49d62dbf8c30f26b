package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/pandastack/pandastack/sdk/go"
)

// toolRunCode runs Python in the session sandbox's kernel. Plots are
// reported as text (size) and returned as images after the text.
func toolRunCode(ctx context.Context, s *session, raw json.RawMessage) *toolResult {
	var a struct {
		Code           string   `json:"code"`
		TimeoutSeconds *float64 `json:"timeout_seconds"`
	}
	if err := decodeArgs(raw, &a); err != nil {
		return errorResult("%v", err)
	}
	if strings.TrimSpace(a.Code) == "" {
		return errorResult("invalid arguments: code is required")
	}
	timeout, bad := timeoutArg(a.TimeoutSeconds)
	if bad != nil {
		return bad
	}
	return withSandbox(ctx, s, func(sb *sdk.Sandbox) *toolResult {
		ex, err := sb.RunCode(ctx, a.Code, sdk.CodeOptions{TimeoutSeconds: timeout})
		if err != nil {
			if sdk.IsConflict(err) {
				return errorResult("run_code needs a sandbox from template \"code-interpreter\": call sandbox_create with template \"code-interpreter\" first (%s)", apiErrorText(err))
			}
			return sandboxError(s, sb, "run_code", err)
		}
		var b strings.Builder
		for _, st := range []struct{ name, text string }{{"stdout", ex.Stdout}, {"stderr", ex.Stderr}} {
			if st.text != "" {
				text := st.text
				if len(text) > maxStreamBytes {
					text = text[:maxStreamBytes] + "\n[truncated]"
				}
				fmt.Fprintf(&b, "--- %s ---\n%s", st.name, text)
				if !strings.HasSuffix(text, "\n") {
					b.WriteString("\n")
				}
			}
		}
		var images []content
		for _, r := range ex.Results {
			switch {
			case r.PNG != "":
				fmt.Fprintf(&b, "--- image (PNG, %d bytes base64): %s ---\n", len(r.PNG), r.Text)
				images = append(images, content{Type: "image", Data: r.PNG, MimeType: "image/png"})
			case r.IsMainResult:
				fmt.Fprintf(&b, "--- result ---\n%s\n", r.Text)
			}
		}
		if ex.Error != nil {
			fmt.Fprintf(&b, "--- error: %s: %s ---\n%s", ex.Error.Name, ex.Error.Value, strings.Join(ex.Error.Traceback, ""))
		}
		if b.Len() == 0 {
			b.WriteString("(no output)\n")
		}
		res := textResult("%s", b.String())
		res.Content = append(res.Content, images...)
		res.IsError = ex.Error != nil
		return res
	})
}
