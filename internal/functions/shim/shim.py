# PandaStack function shim for Python: imports the handler once (before
# the function's snapshot is taken), then serves invocations on a TCP port
# on the guest's loopback. Usage: shim.py DIR FILE FUNCTION PORT STATEDIR
import contextlib
import importlib.util
import io
import json
import os
import sys
import time
import traceback
from http.server import BaseHTTPRequestHandler, HTTPServer

code_dir, file, func, port, state = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]


def fail(msg):
    with open(os.path.join(state, "error"), "w") as f:
        f.write(msg)
    sys.exit(1)


path = os.path.join(code_dir, file + ".py")
if not os.path.isfile(path):
    fail("handler file %s.py not found in the bundle" % file)
sys.path.insert(0, code_dir)
os.chdir(code_dir)
try:
    spec = importlib.util.spec_from_file_location(file.replace("/", "."), path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
except BaseException:
    fail(traceback.format_exc())
handler = getattr(mod, func, None)
if not callable(handler):
    fail("%s.py has no function %s" % (file, func))


class Context:
    """What a handler gets as its second argument."""

    def __init__(self, d):
        self.invocation_id = d.get("invocation_id", "")
        self.function_name = d.get("function_name", "")
        self.function_version = d.get("function_version", 0)
        self.trigger = d.get("trigger", "api")
        self.execution_id = d.get("execution_id", "")
        self.scheduled_time = d.get("scheduled_time", "")
        self.deadline_ms = d.get("deadline_ms", 0)

    def get_remaining_time_in_millis(self):
        return max(0, int(self.deadline_ms - time.time() * 1000))


class Serve(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        req = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                result = handler(req.get("event"), Context(req.get("context") or {}))
            body = {"ok": True, "result": result}
            data = json.dumps({**body, "logs": out.getvalue()})
        except BaseException as e:
            stack = traceback.format_exc()
            err = {"type": type(e).__name__, "message": str(e), "stack": stack}
            data = json.dumps({"ok": False, "error": err, "logs": out.getvalue()})
        data = data.encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


srv = HTTPServer(("127.0.0.1", port), Serve)
open(os.path.join(state, "ready"), "w").close()
srv.serve_forever()
