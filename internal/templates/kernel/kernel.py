#!/usr/bin/env python3
"""PandaStack code kernel: a live Python interpreter served on a TCP port.

Baked into the code-interpreter template and started before the bake, so it
is already running in every sandbox made from it. Standard library only.

Protocol: a client connects and sends one JSON line, then reads JSON lines
until the connection closes.

  {"op": "execute", "code": "...", "context": "default", "timeout": 30, "env": {"K": "v"}}
      -> {"type": "stdout", "text": "..."}          (any number, streamed)
         {"type": "stderr", "text": "..."}
         {"type": "result", "text": "...", "png": "<base64>", "html": "...",
          "is_main_result": true}
         {"type": "error", "name": "...", "value": "...", "traceback": [...]}
         {"type": "end", "execution_count": N, "timed_out": false}
  {"op": "contexts"} -> {"type": "contexts", "contexts": [{"id": ..., "execution_count": N, "cwd": ...}]}
  {"op": "create", "context": "c1", "cwd": "/tmp"} -> {"type": "context", "id": ..., "execution_count": 0, "cwd": ...}
  {"op": "restart", "context": "c1"} -> {"type": "ok"}   (an empty namespace, the same cwd)
  {"op": "remove", "context": "c1"}  -> {"type": "ok"}
  {"op": "ping"}     -> {"type": "pong", "pid": N}

Each context is one namespace kept between calls, with a working directory
of its own: a run starts in its context's directory, and a chdir during the
run stays with that context (as if each were a process of its own). Runs happen one at a
time, in the main thread, so a timeout (or the client going away) can
interrupt them with SIGINT; the interpreter stays usable afterwards.
Matplotlib figures left open by a run are sent as PNG results and closed,
like Jupyter's inline backend.

Every sandbox restored from the template (or forked, woken, restored from a
snapshot) starts with this process's memory, so with the same state of
`random`, `numpy.random` and tempfile's name generator. The guest agent
publishes a new random token in /run/pandastack/generation after each
restore, once the kernel RNG is reseeded; before each run the kernel
compares it with the token it last saw and, when it changed, reseeds those
generators from os.urandom — except a generator the user seeded (seed(n),
setstate), whose sequence is kept. (`secrets`, `os.urandom` and `uuid.uuid4`
read the kernel RNG and need nothing.)
"""

import ast
import base64
import io
import json
import linecache
import os
import queue
import signal
import socket
import socketserver
import sys
import threading
import time
import traceback

os.environ.setdefault("MPLBACKEND", "Agg")

MAIN_THREAD = threading.main_thread().ident
CONTEXT_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.")


INITIAL_CWD = os.getcwd()


class Context:
    def __init__(self, cid, cwd=None):
        self.id = cid
        self.namespace = {"__name__": "__main__", "__builtins__": __builtins__}
        self.execution_count = 0
        self.cwd = cwd or INITIAL_CWD

    def info(self):
        return {"id": self.id, "execution_count": self.execution_count, "cwd": self.cwd}


contexts = {}
jobs = queue.Queue()

GENERATION_FILE = os.environ.get("PANDASTACK_GENERATION_FILE", "/run/pandastack/generation")


def read_generation():
    try:
        with open(GENERATION_FILE, "rb") as f:
            return f.read(128)
    except OSError:
        return None


generation = read_generation()


# Generators whose state the user set (seed(n), setstate): their sequence is
# the user's choice and is kept across restores — a notebook that calls
# numpy.random.seed(0) gets the same numbers after an auto-hibernate and
# wake, and a fork continues it like os.fork would. The others are reseeded.
user_seeded = set()


def track_seeding():
    """Wraps the seeding functions of random and numpy.random (once each,
    when they are imported) to note when the user sets their state."""
    targets = (("random", lambda m: m, ("seed", "setstate")),
               ("numpy", lambda m: m.random, ("seed", "set_state")))
    for name, ns, funcs in targets:
        mod = sys.modules.get(name)
        if mod is None:
            continue
        try:
            ns = ns(mod)
            for fn in funcs:
                orig = getattr(ns, fn)
                if getattr(orig, "_pandastack_tracked", False):
                    continue

                def wrapper(*args, _orig=orig, _name=name, _fn=fn, **kwargs):
                    fresh = _fn == "seed" and not kwargs and (not args or args[0] is None)
                    r = _orig(*args, **kwargs)
                    if fresh:
                        user_seeded.discard(_name)  # seed() / seed(None): from the OS
                    else:
                        user_seeded.add(_name)
                    return r

                wrapper._pandastack_tracked = True
                wrapper.__doc__, wrapper.__name__ = orig.__doc__, fn
                setattr(ns, fn, wrapper)
        except Exception as e:
            sys.stderr.write("track %s seeding: %s\n" % (name, e))


def reseed_if_restored():
    """Reseeds the userspace generators the user did not seed when the VM was
    restored since the last run: the restore gave this process the random
    state of every other clone of the snapshot."""
    global generation
    track_seeding()  # modules a previous run imported
    g = read_generation()
    if g is None or g == generation:
        return
    generation = g
    try:
        rnd = sys.modules.get("random")
        if rnd is not None and "random" not in user_seeded:
            rnd._inst.seed(os.urandom(32))
        np = sys.modules.get("numpy")
        if np is not None and "numpy" not in user_seeded:
            # The legacy global RandomState behind np.random.rand & co.
            np.random.mtrand._rand.seed([int.from_bytes(os.urandom(4), "little") for _ in range(8)])
        tf = sys.modules.get("tempfile")
        if tf is not None:
            tf._name_sequence = None  # made again, from a fresh seed, on next use
        ssl = sys.modules.get("_ssl")
        if ssl is not None:
            # OpenSSL's generators (keys, TLS handshakes) are the
            # process's, reseeded hourly: RAND_add reseeds the primary one
            # from the kernel's RNG, and every thread's at its next draw.
            ssl.RAND_add(os.urandom(32), 32.0)
    except Exception as e:  # never break a run over it
        sys.stderr.write("reseed after restore: %s\n" % e)


class Stream(io.TextIOBase):
    """A file object that turns writes into stdout/stderr events."""

    def __init__(self, name, send):
        self.name_ = name
        self.send = send

    def writable(self):
        return True

    def write(self, s):
        if not isinstance(s, str):
            raise TypeError("write() argument must be str, not %s" % type(s).__name__)
        if s:
            self.send({"type": self.name_, "text": s})
        return len(s)

    def flush(self):
        pass

    def isatty(self):
        return False


def figure_results(shown):
    """PNG results for every open matplotlib figure, then closes them."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return []
    out = []
    for num in plt.get_fignums():
        fig = plt.figure(num)
        buf = io.BytesIO()
        try:
            fig.savefig(buf, format="png")
        except Exception as e:  # a broken figure must not break the run
            out.append({"type": "stderr", "text": "could not render figure %s: %s\n" % (num, e)})
            continue
        out.append({"type": "result", "text": repr(fig), "png": base64.b64encode(buf.getvalue()).decode(),
                    "is_main_result": fig is shown})
    plt.close("all")
    return out


def rich(value):
    """A result event for value: its repr, plus HTML/PNG when it has them."""
    r = {"type": "result", "is_main_result": True}
    try:
        r["text"] = repr(value)
    except Exception as e:
        r["text"] = "<repr failed: %s>" % e
    for attr, key in (("_repr_html_", "html"), ("_repr_png_", "png")):
        m = getattr(value, attr, None)
        if callable(m) and not isinstance(value, type):
            try:
                v = m()
            except Exception:
                continue
            if v is None:
                continue
            if key == "png" and isinstance(v, bytes):
                v = base64.b64encode(v).decode()
            r[key] = v
    return r


def is_figure(value):
    fig = sys.modules.get("matplotlib.figure")
    return fig is not None and isinstance(value, fig.Figure)


def run(ctx, code, send):
    """Runs code in ctx, sending events; returns nothing (errors are events)."""
    ctx.execution_count += 1
    name = "<cell-%d>" % ctx.execution_count
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)
    old = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = Stream("stdout", send), Stream("stderr", send)
    shown = None
    try:
        os.chdir(ctx.cwd)
        tree = ast.parse(code, name, "exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        exec(compile(tree, name, "exec"), ctx.namespace)
        if last is not None:
            value = eval(compile(last, name, "eval"), ctx.namespace)
            if value is not None:
                ctx.namespace["_"] = value
                if is_figure(value):
                    shown = value
                else:
                    send(rich(value))
    except BaseException as e:  # KeyboardInterrupt and SystemExit included
        tb = traceback.TracebackException.from_exception(e)
        # Drop the kernel's own frames: the user's code starts at a cell.
        frames = list(tb.stack)
        while frames and not frames[0].filename.startswith("<cell-"):
            frames.pop(0)
        tb.stack = traceback.StackSummary.from_list(frames)
        send({"type": "error", "name": type(e).__name__, "value": str(e), "traceback": list(tb.format())})
    finally:
        sys.stdout, sys.stderr = old
        try:
            ctx.cwd = os.getcwd()  # a chdir in the run stays with its context
        except OSError:
            pass  # the directory was removed: the context keeps its last one
        try:
            for ev in figure_results(shown):
                send(ev)
        except BaseException as e:
            send({"type": "stderr", "text": "could not collect figures: %s\n" % e})


class Job:
    def __init__(self, ctx, code, send, env=None):
        self.ctx, self.code, self.send, self.env = ctx, code, send, env or {}
        self.started = threading.Event()
        self.done = threading.Event()
        self.interrupted = False


class run_env:
    """Sets a run's environment variables, and puts back what they were."""

    def __init__(self, env):
        self.env = env

    def __enter__(self):
        self.saved = {k: os.environ.get(k) for k in self.env}
        os.environ.update(self.env)

    def __exit__(self, *exc):
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        return False


def interrupt(job):
    """Raises KeyboardInterrupt in the main thread while job runs."""
    if job.done.is_set() or not job.started.is_set():
        return
    job.interrupted = True
    signal.pthread_kill(MAIN_THREAD, signal.SIGINT)


def main_loop():
    while True:
        job = jobs.get()
        try:
            reseed_if_restored()
            job.started.set()
            with run_env(job.env):
                run(job.ctx, job.code, job.send)
        except KeyboardInterrupt:
            pass  # arrived between the user's code and the end of run
        finally:
            job.done.set()


def valid_context_id(cid):
    return isinstance(cid, str) and 0 < len(cid) <= 64 and set(cid) <= CONTEXT_CHARS


def manage(op, req, send):
    """Creates, restarts or removes a context (see the module's protocol)."""
    cid = req.get("context")
    if not valid_context_id(cid):
        send({"type": "error", "name": "ProtocolError", "value": "bad context id", "traceback": []})
        return
    if op == "create":
        cwd = req.get("cwd") or INITIAL_CWD
        if not isinstance(cwd, str) or not os.path.isabs(cwd) or not os.path.isdir(cwd):
            send({"type": "error", "name": "FileNotFoundError", "value": "no such directory: %r" % (cwd,), "traceback": []})
            return
        if cid in contexts:
            send({"type": "error", "name": "FileExistsError", "value": "context %s exists" % cid, "traceback": []})
            return
        ctx = contexts.setdefault(cid, Context(cid, cwd))
        send(dict(ctx.info(), type="context"))
        return
    ctx = contexts.get(cid)
    if ctx is None:
        send({"type": "error", "name": "NotFound", "value": "no context %s" % cid, "traceback": []})
        return
    if op == "restart":
        contexts[cid] = Context(cid, ctx.cwd)  # a run still going keeps the old one
    else:
        contexts.pop(cid, None)
    send({"type": "ok"})


class Handler(socketserver.StreamRequestHandler):
    def handle(self):
        line = self.rfile.readline(64 << 20)
        lock = threading.Lock()
        alive = [True]

        def send(ev):
            data = (json.dumps(ev) + "\n").encode()
            with lock:
                if not alive[0]:
                    return
                try:
                    self.wfile.write(data)
                    self.wfile.flush()
                except OSError:
                    alive[0] = False

        try:
            req = json.loads(line)
            if not isinstance(req, dict):
                raise ValueError("request is not an object")
        except ValueError as e:
            send({"type": "error", "name": "ProtocolError", "value": "bad request: %s" % e, "traceback": []})
            return
        op = req.get("op", "execute")
        if op == "ping":
            send({"type": "pong", "pid": os.getpid()})
            return
        if op == "contexts":
            send({"type": "contexts", "contexts": [c.info() for c in sorted(contexts.values(), key=lambda c: c.id)]})
            return
        if op in ("create", "restart", "remove"):
            manage(op, req, send)
            return
        if op != "execute":
            send({"type": "error", "name": "ProtocolError", "value": "unknown op %r" % op, "traceback": []})
            return
        cid = req.get("context") or "default"
        code = req.get("code")
        if not valid_context_id(cid) or not isinstance(code, str):
            send({"type": "error", "name": "ProtocolError", "value": "bad context id or code", "traceback": []})
            return
        ctx = contexts.get(cid)
        if ctx is None:
            ctx = contexts.setdefault(cid, Context(cid))
        errors = []  # the run's error goes last, after its results

        def collect(ev):
            if ev.get("type") == "error":
                errors.append(ev)
            else:
                send(ev)

        env = req.get("env") or {}
        if not isinstance(env, dict) or not all(isinstance(k, str) and k and "=" not in k and isinstance(v, str) for k, v in env.items()):
            send({"type": "error", "name": "ProtocolError", "value": "bad env", "traceback": []})
            return
        job = Job(ctx, code, collect, env)
        jobs.put(job)
        timeout = req.get("timeout") or 0
        deadline = time.monotonic() + timeout if timeout > 0 else None
        timed_out = False
        # Watch for the deadline and for the client hanging up.
        self.connection.setblocking(False)
        while not job.done.wait(0.05):
            if deadline is not None and not timed_out and time.monotonic() > deadline:
                timed_out = True
                interrupt(job)
            try:
                if self.connection.recv(1, socket.MSG_PEEK) == b"":
                    alive[0] = False
                    interrupt(job)
                    job.done.wait()
                    return
            except BlockingIOError:
                pass
            except OSError:
                alive[0] = False
                interrupt(job)
                job.done.wait()
                return
            if job.interrupted and not job.done.wait(2):
                interrupt(job)  # the first SIGINT was swallowed; again
        self.connection.setblocking(True)
        if timed_out:
            tb = errors[-1]["traceback"] if errors else []
            errors = [{"type": "error", "name": "TimeoutError",
                       "value": "execution exceeded %gs and was interrupted" % timeout, "traceback": tb}]
        for ev in errors[-1:]:
            send(ev)
        send({"type": "end", "execution_count": ctx.execution_count, "timed_out": timed_out})


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 49999
    host = sys.argv[2] if len(sys.argv) > 2 else "127.0.0.1"
    # A shell's "cmd &" starts the kernel with SIGINT ignored; interrupts
    # must raise KeyboardInterrupt.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    # Modules to import before serving (comma-separated), so the first run
    # does not pay for them.
    for mod in filter(None, os.environ.get("PANDASTACK_KERNEL_PRELOAD", "").split(",")):
        try:
            __import__(mod)
        except Exception as e:
            sys.stderr.write("preload %s: %s\n" % (mod, e))
    import random  # noqa: F401 (its seeding is tracked from the start)
    track_seeding()
    srv = Server((host, port), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    sys.stderr.write("pandastack kernel listening on %s:%d (pid %d)\n" % (host, port, os.getpid()))
    sys.stderr.flush()
    while True:
        try:
            main_loop()
        except KeyboardInterrupt:
            continue  # an interrupt outside any run


if __name__ == "__main__":
    main()
