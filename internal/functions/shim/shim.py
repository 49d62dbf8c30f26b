# PandaStack function shim for Python: loads the handler once (before the
# function's snapshot is taken), then serves invocations, one JSON line
# each way ({"event", "context"} in; {"ok", "result" | "error", "logs"}
# out), on two ways in: the VM's direct port (a virtio-serial port of its
# own, read here: lines one after another, the host's fresh invocations),
# and a TCP port on the guest's loopback (one connection per invocation,
# through the guest agent: deploys, warm invocations, machines without a
# direct port). Few modules, so little to load and, under TCG, to
# translate. A fresh invocation's line may come with the hello's part
# (functions/hello.go): "hello " and the call with a seed and the host's
# time, which the shim mixes into the kernel's RNG and sets the clock to
# before the call runs, in place of the guest agent.
#
# Two ways to start:
#   shim.py DIR FILE FUNCTION PORT STATEDIR   load the handler, then serve
#   shim.py --wait PORT STATEDIR              serve first, and load the
#       handler when a {"load": {"dir", "file", "function", "env",
#       "files"}} line asks (answered {"ok"} or {"ok": false, "error"}),
#       after writing files ([{"path", "mode", "data" (base64)}]) under
#       dir: the runtime base snapshot is taken while the shim waits so,
#       and every deploy restores it instead of starting Python.
import base64
import contextlib
import fcntl
import importlib.util
import io
import json
import os
import select
import socket
import struct
import sys
import time
import traceback

handler = None
urandom = None  # /dev/urandom, open for the hello's reseed
generation = None  # the agent's generation file, open for the hello's token


def load(code_dir, file, func, env):
    """Imports FILE.py from code_dir and returns its FUNCTION, or raises
    LoadError saying why not."""
    os.environ.update(env or {})
    path = os.path.join(code_dir, file + ".py")
    if not os.path.isfile(path):
        raise LoadError("handler file %s.py not found in the bundle" % file)
    sys.path.insert(0, code_dir)
    os.chdir(code_dir)
    try:
        spec = importlib.util.spec_from_file_location(file.replace("/", "."), path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = mod
        spec.loader.exec_module(mod)
    except BaseException:
        raise LoadError(traceback.format_exc())
    h = getattr(mod, func, None)
    if not callable(h):
        raise LoadError("%s.py has no function %s" % (file, func))
    keep_openssl()
    return h


def unpack(code_dir, files):
    """Writes a bundle's files (paths relative and clean, checked by the
    server) under code_dir: no process to start for it."""
    for f in files:
        path = os.path.join(code_dir, f["path"])
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as out:
            out.write(base64.b64decode(f["data"]))
        os.chmod(path, f["mode"])


HELLO = b"hello "
PONG = '{"ok": true, "result": "pong", "logs": ""}'
RNDADDENTROPY = 0x40085203  # _IOW('R', 0x03, int[2])
RNDRESEEDCRNG = 0x5207  # _IO('R', 0x07)
GENERATION = "/run/pandastack/generation"


def hello(h):
    """Does what the guest agent's hello does after a restore (the host
    deferred the agent's session): mixes the host's seed into the kernel's
    RNG, credited, and has it reseed at once, so nothing here draws from
    the snapshot's random state; sets the clock to the host's; publishes
    the host's new generation token, as the agent does, for processes
    that watch it (the file opened at the start: under TCG an open is
    kernel code run for the first time in a fresh VM, ~8 ms). Raises when
    any of it fails (a shim without CAP_SYS_ADMIN or CAP_SYS_TIME): the
    call must not run then."""
    seed = bytes.fromhex(h["seed"])
    if len(seed) < 32:
        raise ValueError("a hello's seed is %d bytes; want at least 32" % len(seed))
    fcntl.ioctl(urandom, RNDADDENTROPY, struct.pack("ii", 8 * len(seed), len(seed)) + seed)
    fcntl.ioctl(urandom, RNDRESEEDCRNG)
    time.clock_settime_ns(time.CLOCK_REALTIME, int(h["now_ns"]))
    if generation is not None:
        os.pwrite(generation, (h["generation"] + "\n").encode(), 0)


def direct_call(line):
    """A line from the direct port: a call, or a call with the hello's
    part. The reply to the latter says "seeded" when the hello's part was
    done and the call ran; without it the call did not run."""
    if line == b"ping":  # the bench's floor (hostbench, shim floor): answered first of all
        return PONG
    if not line.startswith(HELLO):
        return invoke(line)
    try:
        req = json.loads(line[len(HELLO):])
        hello(req)
    except BaseException as e:
        err = {"type": type(e).__name__, "message": "the shim could not do the hello's part: %s" % e, "stack": ""}
        return json.dumps({"ok": False, "seeded": False, "error": err, "logs": ""})
    return invoke(None, req)


def reseed():
    """Every VM restored from one snapshot starts with the same state of
    the random module and of OpenSSL's generators (key generation, TLS
    handshakes: seeded in the process, reseeded only hourly), once any
    was used before the snapshot. Before each call both are reseeded from
    the kernel's RNG, itself reseeded at the restore: random from
    os.urandom; OpenSSL by RAND_add, which reseeds its primary generator
    from the kernel (and so every thread's generator at its next draw)."""
    r = sys.modules.get("random")
    if r is not None:
        r.seed()
    ssl = sys.modules.get("_ssl")
    if ssl is not None:
        ssl.RAND_add(os.urandom(32), 32.0)


def keep_openssl():
    """Loads _ssl, for reseed, when the handler's code loaded OpenSSL's
    library without it (hashlib, a package of its own): the library's
    generators are the process's, whoever uses them."""
    if "_ssl" in sys.modules:
        return
    try:
        with open("/proc/self/maps") as f:
            if "libcrypto" not in f.read():
                return
        import _ssl  # noqa: F401  (kept in sys.modules)
    except (OSError, ImportError):
        pass


class LoadError(Exception):
    pass


DIRECT_PORT = "pandastack.direct"


def open_direct():
    """Opens the VM's direct port: None when its machine has none; an
    error (the shim does not start) when it has one that will not open,
    since the host calls a function on the port its machine has."""
    base = "/sys/class/virtio-ports"
    try:
        names = os.listdir(base)
    except OSError:
        return None
    for n in names:
        try:
            with open(os.path.join(base, n, "name")) as f:
                if f.read().strip() != DIRECT_PORT:
                    continue
        except OSError:
            continue
        return os.open("/dev/" + n, os.O_RDWR)
    return None


def wait_clock(now_ms):
    """A request on the direct port reaches the shim just after the agent
    answered the host's hello, and the agent steps the wall clock from the
    snapshot's time to the host's right after that answer: the handler
    must not see the old time. The host sends its time (now_ms); a clock
    more than a second behind it waits for the step (at most a second)."""
    if not now_ms:
        return
    for _ in range(1000):
        if time.time() * 1000 >= now_ms - 1000:
            return
        time.sleep(0.001)


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


def invoke(line, req=None):
    """Runs one call (line, or req already decoded from a hello line: its
    reply says "seeded") and returns its reply line."""
    global handler
    out = io.StringIO()
    seeded = {} if req is None else {"seeded": True}
    try:
        if req is None:
            req = json.loads(line)
        if req.get("warmup"):
            return warmup(req, out)
        if req.get("load"):
            l = req["load"]
            if handler is not None:
                raise LoadError("a handler is loaded already")
            try:
                unpack(l["dir"], l.get("files") or [])
                handler = load(l["dir"], l["file"], l["function"], l.get("env"))
            except LoadError as e:
                return json.dumps({"ok": False, "error": {"type": "LoadError", "message": str(e), "stack": ""}, "logs": ""})
            return json.dumps({"ok": True, "result": None, "logs": ""})
        if handler is None:
            raise LoadError("no handler is loaded")
        wait_clock(req.get("now_ms"))
        reseed()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            result = handler(req.get("event"), Context(req.get("context") or {}))
        return json.dumps({"ok": True, "result": result, "logs": out.getvalue(), **seeded})
    except BaseException as e:
        err = {"type": type(e).__name__, "message": str(e), "stack": traceback.format_exc()}
        return json.dumps({"ok": False, "error": err, "logs": out.getvalue(), **seeded})


def warmup(req, out):
    """The bake's call before a snapshot: the invocation path run through
    once without the handler (never called here), so what the runtime
    does lazily on a first use is done, and kept in the snapshot, instead
    of in every fresh invocation."""
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        Context(req.get("context") or {}).get_remaining_time_in_millis()
    try:
        raise ValueError("warm-up")
    except ValueError as e:
        err = {"type": type(e).__name__, "message": str(e), "stack": traceback.format_exc()}
    json.dumps({"ok": False, "error": err, "logs": ""})
    return json.dumps({"ok": True, "result": None, "logs": out.getvalue()})


def main():
    global handler, urandom, generation
    try:
        urandom = os.open("/dev/urandom", os.O_WRONLY)
    except OSError:
        pass  # no hello's part here: the host has the agent do it
    try:
        generation = os.open(GENERATION, os.O_WRONLY)
    except OSError:
        pass  # none to publish (the agent makes it at its first hello)
    if sys.argv[1] == "--wait":
        port, state = int(sys.argv[2]), sys.argv[3]
    else:
        code_dir, file, func, port, state = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
        try:
            handler = load(code_dir, file, func, None)
        except LoadError as e:
            with open(os.path.join(state, "error"), "w") as f:
                f.write(str(e))
            sys.exit(1)
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", port))
    srv.listen(16)
    try:
        direct = open_direct()
    except OSError as e:
        with open(os.path.join(state, "error"), "w") as f:
            f.write("the shim could not open the VM's direct port: %s" % e)
        sys.exit(1)
    open(os.path.join(state, "ready"), "w").close()
    serve(srv, direct)


def serve(srv, direct):
    """Serves both ways in on this (the main) thread, so a handler runs
    where Python expects code to run (signals, for one). A read of the
    direct port while no host holds it ends at once: the port is left out
    of the wait for a pause that doubles from 2 ms to 100 ms."""
    # The port's reads land in one buffer made before the snapshot: a
    # 64 KiB bytes object per read (os.read) is an allocation whose
    # first run in a fresh VM cost ~10 ms under TCG (measured, 6 each way).
    rview = memoryview(bytearray(1 << 16))
    pending = []  # a line's parts read so far (an event is up to 6 MiB; a read, one 4 KiB buffer)
    pause, resume = 0.002, 0.0
    while True:
        ways, timeout = [srv], None
        if direct is not None:
            if time.monotonic() >= resume:
                ways.append(direct)
            else:
                timeout = max(0.0, resume - time.monotonic())
        ready, _, _ = select.select(ways, [], [], timeout)
        if direct in ready:
            data = bytes(rview[:os.readv(direct, [rview])])
            if not data:
                pending, resume = [], time.monotonic() + pause
                pause = min(2 * pause, 0.1)
            else:
                pause = 0.002
                end = data.find(b"\n")
                while end >= 0:
                    pending.append(data[:end])
                    line, pending, data = b"".join(pending), [], data[end + 1:]
                    reply = memoryview(direct_call(line).encode() + b"\n")
                    try:
                        while reply:
                            reply = reply[os.write(direct, reply):]
                    except OSError:
                        pass  # the host is gone (its VM ends): the reply with it
                    end = data.find(b"\n")
                if data:
                    pending.append(data)
        if srv in ready:
            conn, _ = srv.accept()
            with conn, conn.makefile("rwb") as f:
                reply = invoke(f.readline())
                f.write(reply.encode() + b"\n")
                f.flush()


main()
