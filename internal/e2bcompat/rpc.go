package e2bcompat

import (
	"encoding/base64"
	"net/http"
	"path"
	"strings"
)

// rpcMethod serves one Connect method.
type rpcMethod func(s *Server, w http.ResponseWriter, r *http.Request, c *sandboxCall)

// rpcMethods are the envd methods served, by URL path.
var rpcMethods = map[string]rpcMethod{
	"/process.Process/Start":          (*Server).processStart,
	"/process.Process/Connect":        (*Server).processConnect,
	"/process.Process/List":           (*Server).processList,
	"/process.Process/SendSignal":     (*Server).processSignal,
	"/process.Process/SendInput":      (*Server).processSendInput,
	"/process.Process/CloseStdin":     (*Server).processCloseStdin,
	"/process.Process/Update":         (*Server).processUpdate,
	"/filesystem.Filesystem/Stat":     (*Server).fsStat,
	"/filesystem.Filesystem/ListDir":  (*Server).fsListDir,
	"/filesystem.Filesystem/MakeDir":  (*Server).fsMakeDir,
	"/filesystem.Filesystem/Move":     (*Server).fsMove,
	"/filesystem.Filesystem/Remove":   (*Server).fsRemove,
	"/filesystem.Filesystem/WatchDir": (*Server).fsWatchDir,
}

// serveRPC dispatches a Connect call; a method not served answers
// Connect's unimplemented, naming it.
func (s *Server) serveRPC(w http.ResponseWriter, r *http.Request, c *sandboxCall) {
	m, ok := rpcMethods[r.URL.Path]
	if !ok || r.Method != http.MethodPost {
		e := connectErr("unimplemented", "%s %s is not implemented by PandaStack's E2B compatibility yet", r.Method, r.URL.Path)
		if isStreaming(r) {
			newStream(w).end(e)
			return
		}
		writeConnectError(w, e)
		return
	}
	m(s, w, r, c)
}

// isStreaming reports whether r is a streaming Connect call.
func isStreaming(r *http.Request) bool {
	return strings.HasPrefix(r.Header.Get("Content-Type"), "application/connect+")
}

// rpcUser is the Unix user a call acts as: the Basic auth user name the SDK
// sends (user option), else E2B's default "user".
func rpcUser(r *http.Request) string {
	h := r.Header.Get("Authorization")
	scheme, val, ok := strings.Cut(h, " ")
	if ok && strings.EqualFold(scheme, "Basic") {
		if b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(val)); err == nil {
			if u, _, _ := strings.Cut(string(b), ":"); u != "" {
				return u
			}
		}
	}
	return "user"
}

// home is a user's home directory in E2B-style templates.
func home(user string) string {
	if user == "root" {
		return "/root"
	}
	return "/home/" + user
}

// resolvePath makes p absolute as envd does: "" is the home directory, "~"
// and "~/..." are expanded, relative paths are under the home directory.
func resolvePath(p, user string) string {
	switch {
	case p == "" || p == "~":
		return home(user)
	case strings.HasPrefix(p, "~/"):
		return path.Join(home(user), p[2:])
	case !strings.HasPrefix(p, "/"):
		return path.Join(home(user), p)
	}
	return path.Clean(p)
}
