"""End-to-end tests against a real PandaStack server with real microVMs.

Run them with the repository's scripts/with-server, which exports
PANDASTACK_BASE_URL and PANDASTACK_API_KEY (an admin key):

    PANDASTACK_E2E_CACHE=/var/cache/pandastack-e2e scripts/with-server \\
        python3 -m unittest discover -s sdk/python/tests -v

Skipped when PANDASTACK_BASE_URL is not set.
"""

import _support  # noqa: F401  (sys.path)

import asyncio
import builtins
import hashlib
import io
import os
import ssl
import tempfile
import threading
import time
import unittest
import uuid
from unittest import mock

from pandastack import (AuthenticationError, ConflictError, GoneError, InvalidArgumentError,
                        MethodNotAllowedError, NotFoundError, PandaStack, PandaStackError,
                        PermissionDeniedError, QuotaExceededError, RateLimitError, Sandbox,
                        Snapshot)
from pandastack.aio import AsyncPandaStack, AsyncSandbox

HAVE_SERVER = bool(os.environ.get("PANDASTACK_BASE_URL") and os.environ.get("PANDASTACK_API_KEY"))


@unittest.skipUnless(HAVE_SERVER, "needs a server: run under scripts/with-server")
class E2E(unittest.TestCase):
    def sandbox(self, **kw):
        kw.setdefault("ttl_seconds", 300)
        sbx = Sandbox.create(template="base", **kw)
        self.addCleanup(sbx.kill)
        return sbx

    def test_terminal(self):
        sbx = self.sandbox()
        t = sbx.open_terminal("/bin/sh", rows=24, cols=80, envs={"PS1": "$ "})
        seen = b""

        def until(term, want):
            nonlocal seen
            while want not in seen:
                b = term.read()
                self.assertTrue(b, f"terminal ended before {want!r}: {seen!r}")
                seen += b

        t.write("stty size; echo py-$((6*7))\n")
        until(t, b"py-42")
        self.assertIn(b"24 80", seen)
        t.resize(40, 120)
        t.write("stty size\n")
        until(t, b"40 120")
        t.write("sleep 1; echo away-$((2*5))\n")
        until(t, b"away-$((2*5))\r\n")  # the echo of the typed line
        t.close()  # a dropped connection: the session waits
        again = sbx.reattach_terminal(t.session_id, t.offset)
        seen = b""
        until(again, b"away-10")
        again.write("exit 4\n")
        self.assertEqual(again.wait(), 4)
        with self.assertRaises(NotFoundError):
            sbx.reattach_terminal(t.session_id)

    def test_watch_dir(self):
        sbx = self.sandbox()
        sbx.exec("mkdir -p /tmp/py-watched")
        events = sbx.filesystem.watch_dir("/tmp/py-watched", recursive=True, timeout_seconds=120)
        seen = []

        def until(want):
            for ev in events:
                seen.append(f"rename {ev['from']}>{ev['path']}" if ev["type"] == "rename"
                            else f"{ev['type']} {ev['path']}")
                if want in seen:
                    return
            self.fail(f"no {want!r} in {seen}")

        sbx.filesystem.write("/tmp/py-watched/sub/a.txt", "1")
        until("create sub/a.txt")
        sbx.exec("echo more >> /tmp/py-watched/sub/a.txt")
        until("write sub/a.txt")
        sbx.exec("mv /tmp/py-watched/sub /tmp/py-watched/moved")
        until("rename sub>moved")
        sbx.exec("rm -r /tmp/py-watched/moved")
        until("remove moved/a.txt")
        events.close()

    def test_volumes(self):
        c = PandaStack()
        name = "py-" + uuid.uuid4().hex[:8]
        vol = c.volumes.create(name, 32)
        self.addCleanup(lambda: c.volumes.delete(vol["id"]))
        a = Sandbox.create(template="base", ttl_seconds=300, volumes={name: "/data"})
        self.assertEqual(c.volumes.get(name)["sandbox_id"], a.id)
        with self.assertRaises(ConflictError):
            Sandbox.create(template="base", ttl_seconds=60, volumes={vol["id"]: "/data"})
        with self.assertRaises(ConflictError):
            c.volumes.delete(name)
        a.filesystem.write("/data/kept.txt", "kept")
        a.kill()
        b = self.sandbox(volumes={name: "/mnt/v"})
        self.assertEqual(b.filesystem.read("/mnt/v/kept.txt"), "kept")
        b.kill()
        self.assertEqual(c.volumes.get(name)["sandbox_id"], "")

    def test_readme_example(self):
        out = io.StringIO()

        def print(*a, **kw):  # noqa: A001 - the README's print, captured
            kw.setdefault("file", out)
            builtins.print(*a, **kw)

        sbx = Sandbox.create(template="base", ttl_seconds=300, metadata={"task": "x"}, env={"A": "1"})
        self.addCleanup(sbx.kill)
        r = sbx.exec("python3 -c 'print(2 ** 10)'", timeout_seconds=30); print(r.stdout, r.exit_code)
        sbx.exec("for i in 1 2 3; do echo $i; sleep 1; done", on_stdout=lambda chunk: print(chunk, end=""))
        sbx.filesystem.write("/work/out.txt", "hello"); sbx.filesystem.read("/work/out.txt")
        self.assertEqual(out.getvalue(), "1024\n 0\n1\n2\n3\n")
        self.assertEqual((r.stdout, r.stdout_bytes, r.stderr, r.exit_code, r.timed_out),
                         ("1024\n", b"1024\n", "", 0, False))
        self.assertGreater(r.pid, 0)
        self.assertEqual(sbx.filesystem.read("/work/out.txt"), "hello")
        self.assertEqual(sbx.filesystem.read_bytes("/work/out.txt"), b"hello")

        self.assertEqual([f.name for f in sbx.filesystem.list("/work")], ["out.txt"])
        self.assertTrue(sbx.filesystem.exists("/work/out.txt"))
        self.assertFalse(sbx.filesystem.exists("/work/nope"))
        sbx.filesystem.make_dir("/work/a/b")
        a, b = "/work/out.txt", "/work/a/b/moved.txt"
        sbx.filesystem.rename(a, b)
        st = sbx.filesystem.stat(b)
        self.assertEqual((st.name, st.size, st.mode, st.is_dir), ("moved.txt", 5, 0o644, False))
        self.assertTrue(sbx.filesystem.stat("/work/a").is_dir)
        with self.assertRaises(ConflictError):
            sbx.filesystem.remove("/work")
        sbx.filesystem.remove("/work", recursive=True)
        self.assertFalse(sbx.filesystem.exists("/work"))
        sink = io.BytesIO()
        sbx.filesystem.write("/tmp/bin", b"\x00\xff", mode=0o600)
        self.assertEqual(sbx.filesystem.read_to("/tmp/bin", sink), 2)
        self.assertEqual((sink.getvalue(), sbx.filesystem.stat("/tmp/bin").mode), (b"\x00\xff", 0o600))
        # E2B's formats: bytes as they are, a stream of chunks, and text that
        # refuses to alter bytes that are not UTF-8.
        self.assertEqual(sbx.filesystem.read("/tmp/bin", format="bytes"), b"\x00\xff")
        self.assertEqual(b"".join(sbx.filesystem.read("/tmp/bin", format="stream")), b"\x00\xff")
        with self.assertRaises(UnicodeDecodeError):
            sbx.filesystem.read("/tmp/bin")
        self.assertEqual(sbx.filesystem.read("/tmp/bin", errors="replace"), "\x00\ufffd")
        with self.assertRaises(ValueError):
            sbx.filesystem.read("/tmp/bin", format="blob")

        p = sbx.exec("sleep 100", background=True)
        self.assertIn(p.pid, [q.pid for q in sbx.processes() if q.running])
        sbx.signal(p.pid, "TERM")
        res = sbx.attach(p.pid, on_stdout=lambda c: None)
        self.assertEqual((res.exit_code, res.signal), (143, "SIGTERM"))

        old = sbx.expires_at
        sbx.set_ttl(600)
        self.assertGreater(sbx.expires_at, old)
        sbx.refresh()
        self.assertEqual((sbx.state, sbx.accel in ("kvm", "tcg"), sbx.env, sbx.metadata),
                         ("running", True, {"A": "1"}, {"task": "x"}))
        self.assertEqual(sbx.exec("echo $A").stdout, "1\n")

        client = PandaStack(token=os.environ["PANDASTACK_API_KEY"], base_url=os.environ["PANDASTACK_BASE_URL"])
        sandbox = client.sandboxes.create(template="base", ttl_seconds=600)
        self.addCleanup(sandbox.kill)
        self.assertEqual(client.sandboxes.get(sandbox.id).id, sandbox.id)
        self.assertEqual([s.id for s in client.sandboxes.list(metadata={"task": "x"})], [sbx.id])
        sbx.kill()
        self.assertEqual(sbx.refresh().state, "killed")
        self.assertNotIn(sbx.id, [s.id for s in client.sandboxes.list()])
        self.assertIn(sbx.id, [s.id for s in client.sandboxes.list(all=True)])

    def test_architecture_examples(self):
        """The product's documented Python example, line for line."""
        out = io.StringIO()

        def print(*a, **kw):  # noqa: A001 - the example's print, captured
            kw.setdefault("file", out)
            builtins.print(*a, **kw)

        sbx = Sandbox.create(template="code-interpreter", ttl_seconds=300, metadata={"task": "x"})
        self.addCleanup(sbx.kill)
        r = sbx.exec("python -c 'print(2 ** 10)'", timeout_seconds=30); print(r.stdout, r.exit_code)
        sbx.filesystem.write("/work/out.txt", "hello"); sbx.filesystem.read("/work/out.txt")
        branch = sbx.fork(); sbx.snapshot(); sbx.hibernate(); sbx.wake()
        self.addCleanup(branch.kill)
        client = PandaStack(token=os.environ["PANDASTACK_API_KEY"])   # base URL configurable
        sandbox = client.sandboxes.create(template="code-interpreter", ttl_seconds=600)
        self.addCleanup(sandbox.kill)

        self.assertEqual(out.getvalue(), "1024\n 0\n")
        self.assertEqual(branch.filesystem.read("/work/out.txt"), "hello")
        self.assertEqual(sbx.state, "running")
        r = sandbox.exec("python -c 'import numpy, pandas; print(numpy.arange(4).sum())'", timeout_seconds=120)
        self.assertEqual((r.stdout, r.exit_code), ("6\n", 0), r.stderr)

    def test_run_code(self):
        """run_code keeps a live interpreter: state, plots, errors, timeouts."""
        sbx = Sandbox.create(template="code-interpreter", ttl_seconds=300)
        self.addCleanup(sbx.kill)
        ex = sbx.run_code("a = 21\nprint('hi')\na * 2")
        self.assertEqual((ex.text, ex.logs.stdout, ex.error), ("42", ["hi", "\n"], None))
        self.assertEqual(sbx.run_code("a + 1").text, "22")
        ex = sbx.run_code("import matplotlib.pyplot as plt\n"
                          "plt.figure(figsize=(3, 2), dpi=100)\nplt.plot([0, 1], [1, 0])")
        pngs = [r.png_bytes for r in ex.results if r.png]
        self.assertEqual(len(pngs), 1, ex)
        png = pngs[0]
        self.assertEqual(png[:8], b"\x89PNG\r\n\x1a\n")
        width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
        self.assertEqual((width, height), (300, 200))
        ex = sbx.run_code("{}['missing']")
        self.assertEqual((ex.error.name, ex.error.value), ("KeyError", "'missing'"))
        self.assertIn("{}['missing']", ex.error.traceback)
        ex = sbx.run_code("import time\ntime.sleep(120)", timeout_seconds=2)
        self.assertTrue(ex.timed_out)
        self.assertEqual(ex.error.name, "TimeoutError")
        self.assertEqual(sbx.run_code("a").text, "21")
        self.assertIsNone(sbx.run_code("a", context_id="fresh").text)
        self.assertIn("fresh", [c["id"] for c in sbx.code_contexts()])
        with self.assertRaises(InvalidArgumentError):
            sbx.run_code("1", language="brainfuck")
        plain = self.sandbox()
        with self.assertRaises(ConflictError):
            plain.run_code("1")

    def test_network_policy_and_ports(self):
        sbx = self.sandbox(network={"egress": "deny", "public_ports": [8000]})
        if sbx.network is None:
            self.fail("the server reports no network policy (networking off?)")
        self.assertEqual(sbx.network["egress"], "deny")
        self.assertEqual(sbx.get_host(8000), "8000-%s.%s" % (sbx.id, sbx.domain))
        r = sbx.exec("curl -sS -m 10 http://10.0.0.1:9/; echo rc=$?")
        self.assertIn("rc=7", r.stdout)  # refused at once, not a timeout (28)
        self.assertGreaterEqual(sbx.get_network()["denied_connections"], 1)
        with self.assertRaises(InvalidArgumentError) as cm:
            sbx.set_network({"allow_domains": ["*example.com"]})
        self.assertIn("ambiguous wildcard", cm.exception.message)
        self.assertEqual(sbx.network["egress"], "deny")
        st = sbx.set_network({"deny_cidrs": ["10.0.0.0/8"]})
        self.assertEqual((st["egress"], sbx.network["deny_cidrs"]), ("allow", ["10.0.0.0/8"]))
        u = sbx.sign_port_url(8000, expires_in_seconds=60)
        self.assertEqual(u["host"], sbx.get_host(8000))
        self.assertIn("ps_token=", u["url"])

    def test_streaming_is_live(self):
        sbx = self.sandbox()
        t0, arrivals = time.monotonic(), []
        r = sbx.exec("for i in 1 2 3; do echo $i; sleep 1; done",
                     on_stdout=lambda c: arrivals.append((time.monotonic() - t0, c)))
        end = time.monotonic() - t0
        self.assertEqual("".join(c for _, c in arrivals), "1\n2\n3\n")
        self.assertEqual(r.stdout, "1\n2\n3\n")
        self.assertLess(arrivals[0][0], end - 1.5, f"first chunk at {arrivals[0][0]:.2f}s, end {end:.2f}s")
        self.assertGreaterEqual(len(arrivals), 3)

    def test_exec_options(self):
        sbx = self.sandbox()
        r = sbx.exec(["sh", "-c", 'echo "$0 $B"; pwd; cat; echo oops >&2; exit 7', "argv0"],
                     env={"B": "bee"}, cwd="/tmp", stdin="from stdin\n")
        self.assertEqual((r.stdout, r.stderr, r.exit_code), ("argv0 bee\n/tmp\nfrom stdin\n", "oops\n", 7))
        r = sbx.exec("printf 'a\\377b'")
        self.assertEqual((r.stdout_bytes, r.stdout), (b"a\xffb", "a\ufffdb"))
        r = sbx.exec("sleep 10", timeout_seconds=1)
        self.assertEqual((r.timed_out, r.exit_code), (True, 137))
        errs = []
        r = sbx.exec("head -c 3000000 /dev/zero", discard_output=True,
                     on_stdout_bytes=lambda b: errs.append(len(b)))
        self.assertEqual((r.stdout_bytes, sum(errs)), (b"", 3000000))
        self.assertGreaterEqual(sbx.ping(), 0)

    def test_100mb_round_trip(self):
        sbx = self.sandbox()
        size = 100 << 20
        want = hashlib.sha256()
        with tempfile.TemporaryFile() as f:
            block = os.urandom(1 << 20)
            for i in range(100):
                b = bytes([i]) + block[1:]
                want.update(b)
                f.write(b)
            f.seek(0)
            info = sbx.filesystem.write("/tmp/big.bin", f)  # streamed (chunked) from the file
        self.assertEqual(info.size, size)
        r = sbx.exec("sha256sum /tmp/big.bin", timeout_seconds=120)
        self.assertEqual(r.stdout.split()[0], want.hexdigest())

        class HashWriter:
            def __init__(self):
                self.h, self.n, self.max_chunk = hashlib.sha256(), 0, 0

            def write(self, b):
                self.h.update(b)
                self.n += len(b)
                self.max_chunk = max(self.max_chunk, len(b))

        w = HashWriter()
        self.assertEqual(sbx.filesystem.read_to("/tmp/big.bin", w), size)
        self.assertEqual((w.n, w.h.hexdigest()), (size, want.hexdigest()))
        self.assertLessEqual(w.max_chunk, 1 << 20, "downloaded in chunks, not whole")

    def test_background_attach_signal(self):
        sbx = self.sandbox()
        p = sbx.exec("i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.3; done", background=True)
        self.assertGreater(p.pid, 0)
        procs = {q.pid: q for q in sbx.processes()}
        self.assertTrue(procs[p.pid].background and procs[p.pid].running)

        got, ticked, result = [], threading.Event(), {}

        def on_stdout(chunk):
            got.append(chunk)
            if "".join(got).count("tick") >= 3:
                ticked.set()

        def follow():
            try:
                result["r"] = sbx.attach(p.pid, on_stdout=on_stdout)
            except BaseException as e:  # reported by the main thread
                result["e"] = e

        t = threading.Thread(target=follow)
        t.start()
        self.assertTrue(ticked.wait(30), f"attach output so far: {got!r}")
        self.assertTrue(t.is_alive(), "attach follows the still-running process")
        p.signal("TERM")
        t.join(30)
        self.assertNotIn("e", result)
        r = result["r"]
        self.assertEqual((r.exit_code, r.signal), (143, "SIGTERM"))
        self.assertTrue(r.stdout.startswith("tick 0\n"))
        self.assertFalse({q.pid: q for q in sbx.processes()}[p.pid].running)

    def test_custom_template(self):
        admin = PandaStack()
        name = "py-" + uuid.uuid4().hex[:8]
        with tempfile.TemporaryDirectory() as ctx:
            with open(os.path.join(ctx, "hello.txt"), "w") as f:
                f.write("hello from the context\n")
            spec = "FROM base\nENV WHO=python\nWORKDIR /app\nCOPY hello.txt hello.txt\n"
            lines = []
            t = admin.build_template(name, on_log=lines.append, spec=spec, context_dir=ctx)
            with self.assertRaises(InvalidArgumentError) as cm:
                admin.build_template(name, spec="FROM base\nFROB x\n", context_dir=ctx)
            self.assertIn("line 2", cm.exception.message)
        self.assertEqual((t.name, t.version), (name, 1))
        self.assertTrue(any("COPY hello.txt hello.txt" in ln for ln in lines), lines)
        self.assertEqual([v["version"] for v in admin.template_versions(name)], [1])
        sbx = Sandbox.create(template=name, ttl_seconds=300)
        self.addCleanup(sbx.kill)
        r = sbx.exec("echo $WHO; cat hello.txt")
        self.assertEqual(r.stdout, "python\nhello from the context\n")

    def test_custom_template_for_a_team(self):
        base_url = os.environ["PANDASTACK_BASE_URL"]
        admin = PandaStack()
        suffix = uuid.uuid4().hex[:8]
        key = admin.create_key("py-build-" + suffix)
        team = PandaStack(token=key.key, base_url=base_url)
        name, spec = "py-team-" + suffix, "FROM base\nENV WHO=team\n"
        with self.assertRaises(NotFoundError) as cm:  # refused before any build
            admin.build_template(name, spec=spec, team="py-no-such-team-" + suffix)
        self.assertIn("py-no-such-team-" + suffix, cm.exception.message)
        with self.assertRaises(PermissionDeniedError):  # a team key builds only its own
            team.build_template(name, spec=spec, team="admin")
        t = admin.build_template(name, spec=spec, team=key.team)
        self.assertEqual((t.name, t.version, t.team_id), (name, 1, key.team_id))
        self.assertEqual([v["version"] for v in team.template_versions(name)], [1])
        with self.assertRaises(NotFoundError):  # the team's template, not a public one
            admin.template_versions(name)
        sbx = team.sandboxes.create(template=name, ttl_seconds=300)
        self.addCleanup(sbx.kill)
        self.assertEqual(sbx.exec("echo $WHO").stdout, "team\n")

    def test_snapshot_export_import(self):
        base_url = os.environ["PANDASTACK_BASE_URL"]
        admin = PandaStack()
        sbx = self.sandbox()
        sbx.filesystem.write("/root/exported.txt", "round trip")
        name = "py-exp-" + uuid.uuid4().hex[:8]
        snap_id = sbx.snapshot(name)["id"]
        sbx.kill()

        exp = admin.export_snapshot(snap_id)
        self.assertIsInstance(exp, Snapshot)
        self.assertEqual((exp.id, exp.name, exp.export_error), (snap_id, name, None))
        self.assertTrue(exp.object_key)
        self.assertIsNotNone(exp.exported_at)
        self.assertGreater(exp.size_bytes, 0)

        async def again():  # the async client: an exported snapshot answers at once
            c = AsyncPandaStack()
            self.assertEqual((await c.export_snapshot(snap_id)).object_key, exp.object_key)
            with self.assertRaises(ConflictError):  # the exported name is taken here
                await c.import_snapshot(exp.object_key)
        asyncio.run(again())

        imp = admin.import_snapshot(exp.object_key, name=name + "-imported")
        self.assertIsInstance(imp, Snapshot)
        self.assertNotEqual(imp.id, snap_id)  # this server has one with the exported id
        self.assertEqual((imp.name, imp.template, imp.sandbox_id, imp.team_id),
                         (name + "-imported", exp.template, exp.sandbox_id, exp.team_id))
        restored = Sandbox.create(snapshot=imp.id, ttl_seconds=300)
        self.addCleanup(restored.kill)
        self.assertEqual(restored.filesystem.read("/root/exported.txt"), "round trip")

        with self.assertRaises(NotFoundError):
            admin.export_snapshot("snap_doesnotexist")
        with self.assertRaises(NotFoundError):
            admin.import_snapshot("snapshots/snap_doesnotexist")
        team = PandaStack(token=admin.create_key("py-snap-" + uuid.uuid4().hex[:8]).key, base_url=base_url)
        with self.assertRaises(NotFoundError):  # another team's snapshot looks missing
            team.export_snapshot(snap_id)
        with self.assertRaises(NotFoundError):  # a team key finds only its own team's exports
            team.import_snapshot(exp.object_key)

    def test_ca_certificate(self):
        # Needs no key: a wrong one is not even looked at.
        pem = PandaStack(token="pds_wrong", base_url=os.environ["PANDASTACK_BASE_URL"]).ca_certificate()
        self.assertTrue(pem.startswith("-----BEGIN CERTIFICATE-----"), pem[:100])
        self.assertGreater(len(ssl.PEM_cert_to_DER_cert(pem)), 100)
        ctx = ssl.create_default_context(cadata=pem)  # parses as an X.509 certificate
        certs = ctx.get_ca_certs()
        self.assertEqual(len(certs), 1)
        self.assertTrue(certs[0]["subject"])
        self.assertEqual(asyncio.run(AsyncPandaStack().ca_certificate()), pem)

    def test_errors(self):
        base_url = os.environ["PANDASTACK_BASE_URL"]
        admin = PandaStack()
        with self.assertRaises(AuthenticationError) as cm:
            PandaStack(token="pds_wrong", base_url=base_url).sandboxes.list()
        self.assertEqual((cm.exception.status, cm.exception.code), (401, "unauthorized"))
        self.assertTrue(cm.exception.request_id and cm.exception.message)

        with self.assertRaises(NotFoundError) as cm:
            Sandbox.create(template="no-such-template")
        self.assertEqual(cm.exception.status, 404)
        with self.assertRaises(NotFoundError):
            admin.sandboxes.get("sbx_doesnotexist")
        with self.assertRaises(InvalidArgumentError) as cm:
            Sandbox.create(template="base", ttl_seconds=-5)
        self.assertEqual((cm.exception.status, cm.exception.code), (400, "invalid_argument"))

        team = PandaStack(token=admin.create_key("t1").key, base_url=base_url)
        with self.assertRaises(PermissionDeniedError) as cm:
            team.create_key("t2")
        self.assertEqual(cm.exception.status, 403)

        sbx = self.sandbox()
        with self.assertRaises(NotFoundError):  # another team's sandbox looks missing
            team.sandboxes.get(sbx.id)
        sbx.filesystem.write("/root/before-fork.txt", "parent")
        snap = sbx.snapshot()
        from_snap = Sandbox.create(snapshot=snap["id"])
        self.addCleanup(from_snap.kill)
        self.assertEqual(from_snap.filesystem.read("/root/before-fork.txt"), "parent")
        child = sbx.fork()
        self.addCleanup(child.kill)
        self.assertNotEqual(child.id, sbx.id)
        self.assertEqual(child.filesystem.read("/root/before-fork.txt"), "parent")
        sbx.filesystem.write("/tmp/in-memory.txt", "kept")
        self.assertEqual(sbx.hibernate().state, "hibernated")
        self.assertEqual(sbx.exec("cat /tmp/in-memory.txt").stdout, "kept")  # wakes it
        sbx.refresh()
        self.assertEqual(sbx.state, "running")
        sbx.hibernate()
        self.assertEqual(sbx.wake().state, "running")
        sbx.kill()
        sbx.kill()  # idempotent
        with self.assertRaises(GoneError) as cm:
            sbx.exec("true")
        self.assertEqual(cm.exception.status, 410)
        with self.assertRaises(GoneError):
            sbx.filesystem.write("/tmp/x", io.BytesIO(b"x" * (1 << 20)))
        self.assertIsInstance(cm.exception, PandaStackError)

    def test_keys_and_quotas(self):
        base_url = os.environ["PANDASTACK_BASE_URL"]
        admin = PandaStack()
        team = "py-quota-" + uuid.uuid4().hex[:8]
        created = admin.create_key(team, "ci")
        self.assertEqual([k.id for k in admin.list_keys(team=team)], [created.id])
        c = PandaStack(token=created.key, base_url=base_url)
        self.assertEqual([k.id for k in c.list_keys()], [created.id])

        q = admin.set_quotas(team, max_sandboxes=1)
        self.assertEqual((q["max_sandboxes"], q["overridden"]), (1, ["max_sandboxes"]))
        sbx = c.sandboxes.create(template="base", ttl_seconds=120)
        killed = []
        # Killed below, before this key's bucket is emptied and the key
        # rotated; this is for a failure before that point.
        self.addCleanup(lambda: killed or sbx.kill())
        with self.assertRaises(QuotaExceededError) as cm:
            c.sandboxes.create(template="base", ttl_seconds=120)
        self.assertEqual(cm.exception.status, 429)
        self.assertIn("max_sandboxes is 1", cm.exception.message)
        with self.assertRaises(QuotaExceededError):  # a fork's children count too
            sbx.fork()
        self.assertEqual(c.quotas()["usage"]["sandboxes"], 1)
        # Killed now: below, this key's bucket is emptied, then the key is
        # rotated and revoked.
        sbx.kill()
        killed.append(True)

        admin.set_quotas(team, max_sandboxes=None, requests_per_second=0.01, burst=1)
        c.list_keys()
        with self.assertRaises(RateLimitError) as cm:
            c.list_keys()
        self.assertNotIsInstance(cm.exception, QuotaExceededError)
        self.assertEqual(cm.exception.retry_after, 100)
        admin.set_quotas(team, requests_per_second=None, burst=None)

        rotated = admin.rotate_key(created.id)
        with self.assertRaises(AuthenticationError):
            c.list_keys()
        c2 = PandaStack(token=rotated.key, base_url=base_url)
        self.assertEqual(c2.quotas()["team"], team)
        c2.revoke_key(rotated.id)
        with self.assertRaises(AuthenticationError):
            c2.quotas()

    def test_env_configuration(self):
        key, url = os.environ["PANDASTACK_API_KEY"], os.environ["PANDASTACK_BASE_URL"]
        with mock.patch.dict(os.environ, {"PANDASTACK_TOKEN": key, "PANDASTACK_BASE_URL": url}):
            del os.environ["PANDASTACK_API_KEY"]
            tag = uuid.uuid4().hex
            sbx = self.sandbox(metadata={"tag": tag})  # configured from PANDASTACK_TOKEN
            self.assertEqual([s.id for s in Sandbox.list(metadata={"tag": tag})], [sbx.id])
            os.environ["PANDASTACK_API_KEY"] = "pds_invalid"  # takes precedence over the token
            with self.assertRaises(AuthenticationError):
                Sandbox.create(template="base")
        with mock.patch.dict(os.environ, {"PANDASTACK_API_KEY": key}):
            del os.environ["PANDASTACK_BASE_URL"]
            self.assertEqual(PandaStack().base_url, "http://localhost:8080")

    def test_async(self):
        async def main():
            client = AsyncPandaStack()
            sbx = await AsyncSandbox.create(template="base", ttl_seconds=120, client=client)
            try:
                self.assertEqual(sbx.state, "running")
                t0, arrivals = time.monotonic(), []
                r = await sbx.exec("for i in 1 2; do echo $i; sleep 1; done",
                                   on_stdout=lambda c: arrivals.append((time.monotonic() - t0, c)))
                end = time.monotonic() - t0
                self.assertEqual((r.stdout, r.exit_code), ("1\n2\n", 0))
                self.assertLess(arrivals[0][0], end - 0.7)
                # concurrent calls on one loop
                a, b = await asyncio.gather(sbx.exec("echo a"), sbx.filesystem.write("/tmp/f", "x"))
                self.assertEqual((a.stdout, b.size), ("a\n", 1))
                self.assertEqual(await sbx.filesystem.read("/tmp/f"), "x")
                self.assertEqual([c async for c in await sbx.filesystem.read("/tmp/f", format="stream")], [b"x"])
                self.assertIn(sbx.id, [s.id for s in await client.sandboxes.list()])
            finally:
                await sbx.kill()
            self.assertEqual((await sbx.refresh()).state, "killed")
            with self.assertRaises(GoneError):
                await sbx.exec("true")
        asyncio.run(main())

    def test_async_terminal(self):
        async def main():
            sbx = await AsyncSandbox.create(template="base", ttl_seconds=120)
            try:
                t = await sbx.open_terminal("/bin/sh", rows=24, cols=80, envs={"PS1": "$ "})
                seen = b""

                async def until(term, want):
                    nonlocal seen
                    while want not in seen:
                        b = await term.read()
                        self.assertTrue(b, f"terminal ended before {want!r}: {seen!r}")
                        seen += b

                # A write while a read waits in its thread.
                pending = asyncio.ensure_future(until(t, b"aio-42"))
                await t.write("stty size; echo aio-$((6*7))\n")
                await pending
                self.assertIn(b"24 80", seen)
                await t.resize(40, 120)
                await t.write("stty size\n")
                await until(t, b"40 120")
                await t.write("sleep 1; echo away-$((2*5))\n")
                await until(t, b"away-$((2*5))\r\n")  # the echo of the typed line
                await t.close()  # a dropped connection: the session waits
                again = await sbx.reattach_terminal(t.session_id, t.offset)
                seen = b""
                await until(again, b"away-10")
                await again.write("exit 4\n")
                async for _ in again:  # to the end
                    pass
                self.assertEqual(again.exit_code, 4)
            finally:
                await sbx.kill()
        asyncio.run(main())


if __name__ == "__main__":
    unittest.main()
