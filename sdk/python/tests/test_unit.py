"""Unit tests that need no PandaStack server: a local http.server on
127.0.0.1 plays the server."""

import _support  # noqa: F401  (sys.path)

import asyncio
import base64
import hashlib
import http.server
import io
import json
import os
import pickle
import socket
import threading
import time
import unittest
from unittest import mock

import pandastack
from pandastack import (APIConnectionError, AuthenticationError, ConflictError, GoneError,
                        InsufficientStorageError, InternalServerError, InvalidArgumentError, MethodNotAllowedError,
                        NotFoundError, OutputTooLargeError, PandaStack, PandaStackError,
                        PayloadTooLargeError, PermissionDeniedError, QuotaExceededError,
                        RateLimitError, RequestTimeoutError, Sandbox, UnavailableError)
from pandastack._code import read_code_stream
from pandastack._models import read_exec_stream
from pandastack.aio import AsyncPandaStack
from pandastack.errors import error_from_response


def line(obj):
    return (json.dumps(obj) + "\n").encode()


def b64(b):
    return base64.b64encode(b).decode()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive

    def log_message(self, *a):
        pass

    def _body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            h, n = hashlib.sha256(), 0
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    self.rfile.readline()
                    break
                data = self.rfile.read(size)
                h.update(data)
                n += len(data)
                self.rfile.readline()
            return {"chunked": True, "size": n, "sha256": h.hexdigest()}
        n = int(self.headers.get("Content-Length") or 0)
        data = self.rfile.read(n) if n else b""
        return {"chunked": False, "size": n, "data": data}

    def _json(self, status, obj, headers=()):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("X-Request-Id", "req-123")
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _apps(self, path, body):
        """Apps as the server answers them: one app "web" with deploys
        that go live on the second poll."""
        srv = self.server
        app = {"id": "app_1", "name": "web", "git_url": "git://h/web.git", "branch": "main",
               "env_keys": ["TOKEN"], "git_remote": "/git/web.git", "url": "http://web.apps.localhost"}
        dep = {"id": "dep_1", "app_id": "app_1", "status": "queued", "ref": "main"}
        if path == "/v1/apps" and self.command == "POST":
            req = json.loads(body["data"])
            srv.app_requests.append(req)
            if req["name"] == "taken":
                return self._json(409, {"error": {"code": "conflict", "message": "app taken exists"}})
            return self._json(201, dict(app, name=req["name"], webhook_secret="whsec_x"))
        if path == "/v1/apps" and self.command == "GET":
            return self._json(200, {"apps": [app]})
        if path == "/v1/apps/web" and self.command == "GET":
            return self._json(200, app)
        if path == "/v1/apps/web" and self.command == "DELETE":
            self.send_response(204)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if path == "/v1/apps/web/deploys" and self.command == "POST":
            srv.app_requests.append(json.loads(body["data"]) if body["size"] else None)
            return self._json(202, dep)
        if path == "/v1/apps/web/deploys" and self.command == "GET":
            return self._json(200, {"deploys": [dep]})
        if path == "/v1/apps/web/deploys/dep_1" and self.command == "GET":
            srv.polls += 1
            status = "live" if srv.polls >= 2 else "building"
            return self._json(200, dict(dep, status=status, framework="static", log="cloning\n"))
        if path == "/v1/apps/web/deploys/dep_1/logs":
            data = b"cloning\nframework static\n"
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            return self.wfile.write(data)
        if path == "/v1/apps/web/previews" and self.command == "GET":
            return self._json(200, {"previews": [{"app_id": "app_1", "number": 7, "url": "http://pr-7--web.apps.localhost",
                                                  "deploy_id": "dep_7", "live_deploy_id": "dep_7", "status": "live"}]})
        if path == "/v1/apps/web/rollback" and self.command == "POST":
            srv.app_requests.append(json.loads(body["data"]) if body["size"] else None)
            return self._json(200, dict(dep, id="dep_0", status="live"))
        return self._json(404, {"error": {"code": "not_found", "message": "app not found"}})

    def _route(self):
        srv = self.server
        srv.requests.append((self.command, self.path, dict(self.headers)))
        srv.conns.add(self.client_address)
        body = self._body()
        path = self.path.split("?")[0]
        if path.startswith("/v1/err/"):
            code, status = path.split("/")[3], int(path.split("/")[4])
            return self._json(status, {"error": {"code": code, "message": "msg " + code}})
        if path == "/v1/ratelimited":
            return self._json(429, {"error": {"code": "rate_limited", "message": "slow down"}},
                              headers=[("Retry-After", "7")])
        if path == "/v1/keys" and self.command == "GET":
            srv.key_queries.append(self.path)
            return self._json(200, {"keys": [{"id": "key_1", "team": "acme", "team_id": "team_1",
                                              "name": "ci", "prefix": "pds_abcdefgh", "admin": False,
                                              "created_at": "2024-05-06T07:08:09Z",
                                              "revoked_at": "2024-05-07T07:08:09Z"}]})
        if path == "/v1/keys/key_1/rotate" and self.command == "POST":
            return self._json(201, {"id": "key_2", "key": "pds_new", "team": "acme", "team_id": "team_1",
                                    "name": "ci", "prefix": "pds_new", "admin": False})
        if path == "/v1/keys/key_1" and self.command == "DELETE":
            self.send_response(204)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if path == "/v1/teams/acme/quotas" and self.command == "PUT":
            return self._json(200, {"team": "acme", "sent": json.loads(body["data"])})
        if path == "/v1/proxy":
            data = b"<html>bad gateway</html>"
            self.send_response(502)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            return self.wfile.write(data)
        if path == "/v1/slow":
            time.sleep(1.0)
            return self._json(200, {})
        if path == "/v1/health":
            return self._json(200, {"status": "ok"})
        if path == "/v1/databases" and self.command == "POST":
            req = json.loads(body["data"])
            srv.app_requests.append(req)
            if req["name"] == "taken":
                return self._json(409, {"error": {"code": "conflict", "message": "taken"}})
            return self._json(201, {"id": "db-1", "name": req["name"], "state": "running",
                                    "connection_uri": "postgres://u:p@db-1.db.localhost:5432/" + req["name"] + "?sslmode=require"})
        if path == "/v1/databases/db-1/hibernate" and self.command == "POST":
            return self._json(200, {"id": "db-1", "state": "hibernated"})
        if path == "/v1/databases/db-1/fork" and self.command == "POST":
            req = json.loads(body["data"])
            return self._json(201, {"id": "db-2", "name": req["name"], "state": "running", "password": "new"})
        if path.startswith("/v1/apps"):
            return self._apps(path, body)
        if path == "/v1/databases/db-1/restore" and self.command == "POST":
            req = json.loads(body["data"])
            srv.app_requests.append(req)
            if req["target_time"] < "2026":
                return self._json(400, {"error": {"code": "invalid_argument", "message": "before the earliest restorable time"}})
            return self._json(201, {"id": "db-3", "name": req["name"], "state": "running", "password": "own"})
        if path == "/v1/databases/db-1/backups":
            if self.command == "POST":
                return self._json(201, {"id": "dbb-1", "database_id": "db-1", "state": "done", "size_bytes": 42, "verified": False})
            return self._json(200, {"backups": [{"id": "dbb-1", "state": "done"}], "wal": {"last_segment": "000000010000000000000003"}})
        if path == "/v1/volumes" and self.command == "POST":
            req = json.loads(body["data"])
            if req["size_mib"] > 1000:
                return self._json(507, {"error": {"code": "insufficient_storage", "message": "does not fit"}})
            return self._json(201, {"id": "vol_1", "name": req["name"], "size_mib": req["size_mib"], "sandbox_id": ""})
        if path == "/v1/sandboxes" and self.command == "POST":
            req = json.loads(body["data"])
            srv.created.append(req)
            return self._json(201, {"id": "sbx_1", "state": "running", "accel": "tcg",
                                    "template": req["template"], "metadata": {}, "cpus": 1,
                                    "created_at": "2024-05-06T07:08:09.123456789Z",
                                    "auto_hibernate_seconds": req.get("auto_hibernate_seconds", 0)})
        if path == "/v1/sandboxes/sbx_1/files" and self.command == "PUT":
            return self._json(200, {"name": "f", "path": "/f", "size": body["size"], "mode": 420,
                                    "is_dir": False, "mod_time": "2024-05-06T07:08:09Z",
                                    "chunked": body["chunked"], "sha256": body.get("sha256")})
        if path == "/v1/sandboxes/sbx_1/files" and self.command == "GET":
            data = b"x" * 100
            self.send_response(200)
            self.send_header("Content-Length", "200")  # cut off midway
            self.end_headers()
            self.wfile.write(data)
            self.close_connection = True
            return
        snap = {"id": "snap_1", "team_id": "team_1", "name": "n", "sandbox_id": "sbx_1",
                "template": "base", "template_id": "tpl_1", "host": "local", "size_bytes": 42,
                "created_at": "2024-05-06T07:08:09Z"}
        if path == "/v1/snapshots/snap%201%2Fx/export" and self.command == "POST":
            return self._json(200, dict(snap, object_key="snapshots/snap_1",
                                        exported_at="2024-05-06T07:09:09Z"))
        if path == "/v1/snapshots" and self.command == "POST":
            req = json.loads(body["data"])
            srv.imports.append(req)
            if req.get("name") == "taken":
                return self._json(409, {"error": {"code": "conflict", "message": "name taken"}})
            return self._json(201, dict(snap, name=req.get("name", "n")))
        if path == "/v1/ca.pem" and self.command == "GET":
            srv.ca_accepts.append(self.headers.get("Accept"))
            data = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
            self.send_response(200)
            self.send_header("Content-Type", "application/x-pem-file")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            return self.wfile.write(data)
        if path == "/v1/templates/web/build" and self.command == "POST":
            srv.build_queries.append(self.path)
            data = line({"type": "done", "template": {"team_id": "team_1", "name": "web", "id": "t",
                                                      "version": 1}})
            self.send_response(200)
            self.send_header("Content-Type", "application/x-ndjson")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            return self.wfile.write(data)
        if path.startswith("/v1/sandboxes/sbx_1/") and path.endswith(("/snapshot", "/fork")):
            return self._json(405, {"error": {"code": "method_not_allowed", "message": "no"}})
        if path == "/v1/sandboxes/sbx_1/exec":
            req = json.loads(body["data"])
            srv.exec_bodies.append(req)
            if self.headers.get("Accept") != "application/x-ndjson":
                return self._json(400, {"error": {"code": "invalid_argument", "message": "not streaming"}})
            self.send_response(200)
            self.send_header("Content-Type", "application/x-ndjson")
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("X-Request-Id", "req-stream")
            self.end_headers()
            self._chunk(line({"type": "start", "pid": 7}))
            script = req.get("cmd")
            euro = "€".encode()  # 3 bytes, split across two chunks
            if script == "slow":
                for i in range(3):
                    self._chunk(line({"type": "stdout", "data": b64(b"tick %d\n" % i)}))
                    time.sleep(0.3)
            elif script == "split":
                self._chunk(line({"type": "stdout", "data": b64(b"a" + euro[:1])}))
                self._chunk(line({"type": "stdout", "data": b64(euro[1:] + b"b\xff")}))
                self._chunk(line({"type": "stderr", "data": b64(b"err")}))
            elif script == "error":
                self._chunk(line({"type": "error", "error": {"code": "gone", "message": "ended"}}))
                self._chunk(b"")
                return
            elif script == "cut":
                self.close_connection = True
                self.wfile.write(b"0\r\n\r\n")
                return
            self._chunk(line({"type": "exit", "result": {"exit_code": 3, "signal": "",
                                                         "timed_out": False, "duration_ms": 1.5}}))
            self._chunk(b"")
            return
        self._json(404, {"error": {"code": "not_found", "message": "no route for " + path}})

    do_GET = do_POST = do_PUT = do_DELETE = _route


class QuietServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # clients that hang up early (timeouts, cut streams) are expected


class LocalServerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = QuietServer(("127.0.0.1", 0), Handler)
        cls.srv.daemon_threads = True
        cls.srv.requests, cls.srv.conns, cls.srv.exec_bodies, cls.srv.created = [], set(), [], []
        cls.srv.key_queries, cls.srv.imports, cls.srv.ca_accepts, cls.srv.build_queries = [], [], [], []
        cls.srv.app_requests, cls.srv.polls = [], 0
        threading.Thread(target=cls.srv.serve_forever, daemon=True).start()
        cls.url = "http://127.0.0.1:%d" % cls.srv.server_address[1]
        cls.addClassCleanup(cls.srv.server_close)
        cls.addClassCleanup(cls.srv.shutdown)

    def client(self, **kw):
        return PandaStack(token="pds_test", base_url=self.url, **kw)

    def test_rate_limit_has_retry_after(self):
        with self.assertRaises(RateLimitError) as cm:
            self.client()._t.call("GET", "/v1/ratelimited")
        e = cm.exception
        self.assertEqual((e.status, e.code, e.retry_after), (429, "rate_limited", 7.0))
        self.assertNotIsInstance(e, QuotaExceededError)
        again = pickle.loads(pickle.dumps(e))
        self.assertEqual((type(again), again.retry_after, again.code), (RateLimitError, 7.0, "rate_limited"))
        # A quota answer has no Retry-After: waiting does not help.
        with self.assertRaises(QuotaExceededError) as cm:
            self.client()._t.call("GET", "/v1/err/quota_exceeded/429")
        self.assertIsNone(cm.exception.retry_after)

    def test_keys_and_quotas_calls(self):
        c = self.client()
        keys = c.list_keys(team="acme")
        self.assertEqual(self.srv.key_queries[-1], "/v1/keys?team=acme")
        self.assertEqual((keys[0].id, keys[0].team, keys[0].admin), ("key_1", "acme", False))
        self.assertEqual(keys[0].revoked_at.day, 7)
        c.list_keys()
        self.assertEqual(self.srv.key_queries[-1], "/v1/keys")
        self.assertIsNone(c.revoke_key("key_1"))
        k = c.rotate_key("key_1")
        self.assertEqual((k.id, k.key, k.team), ("key_2", "pds_new", "acme"))
        # None resets a limit to the server's default: it is sent as null.
        q = c.set_quotas("acme", max_sandboxes=5, requests_per_second=None)
        self.assertEqual(q["sent"], {"max_sandboxes": 5, "requests_per_second": None})
        with self.assertRaises(InvalidArgumentError):
            c.set_quotas("acme")

    def test_error_mapping_from_server(self):
        c = self.client()
        cases = [("invalid_argument", 400, InvalidArgumentError), ("unauthorized", 401, AuthenticationError),
                 ("forbidden", 403, PermissionDeniedError), ("not_found", 404, NotFoundError),
                 ("method_not_allowed", 405, MethodNotAllowedError), ("conflict", 409, ConflictError),
                 ("gone", 410, GoneError), ("too_large", 413, PayloadTooLargeError),
                 ("output_too_large", 422, OutputTooLargeError), ("quota_exceeded", 429, QuotaExceededError),
                 ("rate_limited", 429, RateLimitError), ("internal", 500, InternalServerError),
                 ("unavailable", 503, UnavailableError), ("timeout", 504, RequestTimeoutError),
                 # the code wins over the status
                 ("gone", 400, GoneError), ("brand_new_code", 409, ConflictError)]
        for code, status, cls in cases:
            with self.subTest(code=code, status=status):
                with self.assertRaises(cls) as cm:
                    c._t.call("GET", f"/v1/err/{code}/{status}")
                e = cm.exception
                self.assertIsInstance(e, PandaStackError)
                self.assertEqual((e.status, e.code, e.message, e.request_id),
                                 (status, code, "msg " + code, "req-123"))
                self.assertIn(code, str(e))
        self.assertTrue(issubclass(QuotaExceededError, RateLimitError))
        self.assertTrue(issubclass(RequestTimeoutError, TimeoutError))

    def test_databases(self):
        c = self.client()
        d = c.databases.create("orders")
        self.assertEqual((d["id"], d["state"]), ("db-1", "running"))
        self.assertEqual(self.srv.app_requests[-1], {"name": "orders"})
        c.databases.create("big", size_mib=4096)
        self.assertEqual(self.srv.app_requests[-1], {"name": "big", "size_mib": 4096})
        self.assertTrue(d["connection_uri"].endswith("/orders?sslmode=require"))
        with self.assertRaises(ConflictError):
            c.databases.create("taken")
        self.assertEqual(c.databases.hibernate("db-1")["state"], "hibernated")
        f = c.databases.fork("db-1", "orders-copy")
        self.assertEqual((f["id"], f["name"], f["password"]), ("db-2", "orders-copy", "new"))
        self.assertEqual(c.databases.backup("db-1")["state"], "done")
        self.assertEqual(c.databases.backups("db-1")["wal"]["last_segment"], "000000010000000000000003")
        r = c.databases.restore("db-1", "orders-then", "2026-11-24T10:30:00Z")
        self.assertEqual((r["id"], r["name"]), ("db-3", "orders-then"))
        self.assertEqual(self.srv.app_requests[-1], {"name": "orders-then", "target_time": "2026-11-24T10:30:00Z"})
        c.databases.restore("db-1", "orders-bigger", "2026-11-24T10:30:00Z", size_mib=2048)
        self.assertEqual(self.srv.app_requests[-1], {"name": "orders-bigger", "target_time": "2026-11-24T10:30:00Z",
                                                     "size_mib": 2048})
        with self.assertRaises(InvalidArgumentError):
            c.databases.restore("db-1", "too-early", "2020-01-01T00:00:00Z")

    def test_apps(self):
        c = self.client()
        a = c.apps.create("web", "git://h/web.git", env={"TOKEN": "t"}, health_path="/up",
                          auto_hibernate_seconds=60)
        self.assertEqual(self.srv.app_requests[-1], {"name": "web", "git_url": "git://h/web.git",
                                                     "env": {"TOKEN": "t"}, "health_path": "/up",
                                                     "auto_hibernate_seconds": 60})
        self.assertEqual((a["name"], a["webhook_secret"]), ("web", "whsec_x"))
        with self.assertRaises(ConflictError):
            c.apps.create("taken")
        self.assertEqual([x["name"] for x in c.apps.list()], ["web"])
        self.assertEqual(c.apps.get("web")["git_remote"], "/git/web.git")
        with self.assertRaises(NotFoundError):
            c.apps.get("nope")
        d = c.apps.deploy("web")
        self.assertEqual((d["id"], d["status"]), ("dep_1", "queued"))
        self.assertIsNone(self.srv.app_requests[-1])  # no ref: no body
        c.apps.deploy("web", ref="v2")
        self.assertEqual(self.srv.app_requests[-1], {"ref": "v2"})
        self.assertEqual(c.apps.deploys("web")[0]["id"], "dep_1")
        self.srv.polls = 0
        done = c.apps.wait_deploy("web", "dep_1", poll_interval=0.01)
        self.assertEqual((done["status"], done["framework"], self.srv.polls), ("live", "static", 2))
        self.assertIn("framework static", c.apps.logs("web", "dep_1"))
        self.assertEqual([(p["number"], p["url"]) for p in c.apps.previews("web")], [(7, "http://pr-7--web.apps.localhost")])
        r = c.apps.rollback("web")
        self.assertEqual((r["id"], r["status"], self.srv.app_requests[-1]), ("dep_0", "live", None))
        c.apps.rollback("web", "dep_0")
        self.assertEqual(self.srv.app_requests[-1], {"deploy_id": "dep_0"})
        self.assertEqual(c.apps.git_remote_url("web"), self.url + "/git/web.git")
        self.assertEqual(c.apps.git_remote_url("web", with_key=True),
                         self.url.replace("http://", "http://pandastack:pds_test@") + "/git/web.git")
        c.apps.delete("web")
        self.assertEqual(self.srv.requests[-1][:2], ("DELETE", "/v1/apps/web"))

        async def run_async():
            ac = AsyncPandaStack(sync_client=c)
            self.srv.polls = 0
            d = await ac.apps.deploy("web")
            return (await ac.apps.wait_deploy("web", d["id"], poll_interval=0.01))["status"]
        self.assertEqual(asyncio.run(run_async()), "live")

    def test_volumes(self):
        c = self.client()
        self.assertEqual(c.volumes.create("data", 64)["id"], "vol_1")
        with self.assertRaises(InsufficientStorageError) as cm:
            c.volumes.create("huge", 1 << 20)
        self.assertEqual((cm.exception.status, cm.exception.code), (507, "insufficient_storage"))
        c.sandboxes.create("base", volumes={"data": "/data"})
        self.assertEqual(self.srv.created[-1]["volumes"], [{"volume": "data", "path": "/data"}])

        async def run_async():
            ac = AsyncPandaStack(sync_client=c)
            return (await ac.volumes.create("data", 64))["id"]
        self.assertEqual(asyncio.run(run_async()), "vol_1")

    def test_snapshot_export_import_ca_and_team_build_calls(self):
        c = self.client()
        e = c.export_snapshot("snap 1/x")
        self.assertIsInstance(e, pandastack.Snapshot)
        self.assertEqual((e.id, e.object_key, e.size_bytes, e.export_error), ("snap_1", "snapshots/snap_1", 42, None))
        self.assertEqual((e.exported_at.minute, e.created_at.minute), (9, 8))
        i = c.import_snapshot("snapshots/snap_1", name="copy")
        self.assertEqual((i.name, i.object_key, i.exported_at), ("copy", None, None))
        c.import_snapshot("snapshots/snap_1")
        self.assertEqual(self.srv.imports[-2:], [{"object_key": "snapshots/snap_1", "name": "copy"},
                                                 {"object_key": "snapshots/snap_1"}])
        with self.assertRaises(ConflictError):
            c.import_snapshot("snapshots/snap_1", name="taken")
        self.assertEqual(c.ca_certificate(), "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
        self.assertEqual(self.srv.ca_accepts[-1], "application/x-pem-file")
        t = c.build_template("web", spec="FROM base\n", team="acme corp")
        self.assertEqual((t.team_id, t.version), ("team_1", 1))
        self.assertEqual(self.srv.build_queries[-1], "/v1/templates/web/build?team=acme%20corp")

        async def run_async():
            ac = AsyncPandaStack(sync_client=c)
            return ((await ac.export_snapshot("snap 1/x")).object_key,
                    (await ac.import_snapshot("snapshots/snap_1", "copy2")).name,
                    await ac.ca_certificate())
        self.assertEqual(asyncio.run(run_async())[:2], ("snapshots/snap_1", "copy2"))

    def test_non_json_error(self):
        with self.assertRaises(UnavailableError) as cm:
            self.client()._t.call("GET", "/v1/proxy")
        self.assertEqual(cm.exception.status, 502)
        self.assertIn("bad gateway", cm.exception.message)
        e = error_from_response(418, b"teapot", None)
        self.assertIs(type(e), PandaStackError)
        e = error_from_response(599, b"", None)
        self.assertIsInstance(e, InternalServerError)

    def test_errors_pickle(self):
        e = pickle.loads(pickle.dumps(GoneError("m", status=410, code="gone", request_id="r")))
        self.assertEqual((type(e), e.status, e.code, e.message, e.request_id), (GoneError, 410, "gone", "m", "r"))

    def test_headers_and_keepalive(self):
        c = self.client()
        before = len(self.srv.conns)
        for _ in range(5):
            self.assertEqual(c.health(), {"status": "ok"})
        self.assertEqual(len(self.srv.conns), before + 1, "keep-alive connection reused")
        _, _, headers = self.srv.requests[-1]
        self.assertEqual(headers["Authorization"], "Bearer pds_test")
        self.assertEqual(headers["User-Agent"], "pandastack-python/" + pandastack.__version__)

    def test_env_configuration(self):
        with mock.patch.dict(os.environ, {"PANDASTACK_TOKEN": "pds_tok", "PANDASTACK_BASE_URL": self.url},
                             clear=False):
            os.environ.pop("PANDASTACK_API_KEY", None)
            c = PandaStack()
            self.assertEqual((c.token, c.base_url), ("pds_tok", self.url))
            os.environ["PANDASTACK_API_KEY"] = "pds_key"
            self.assertEqual(PandaStack().token, "pds_key")
            self.assertEqual(PandaStack(token="pds_arg").token, "pds_arg")
            sbx = Sandbox.create(template="tpl")  # default client from the environment
            self.assertEqual((sbx.id, sbx.template, sbx.accel), ("sbx_1", "tpl", "tcg"))
            self.assertEqual(sbx.created_at.microsecond, 123456)
            self.assertEqual(self.srv.requests[-1][2]["Authorization"], "Bearer pds_key")
        with mock.patch.dict(os.environ, {}, clear=True):
            c = PandaStack()
            self.assertEqual((c.token, c.base_url), (None, "http://localhost:8080"))

    def test_create_auto_hibernate(self):
        sbx = self.client().sandboxes.create("base", auto_hibernate_seconds=30)
        self.assertEqual(self.srv.created[-1]["auto_hibernate_seconds"], 30)
        self.assertEqual(sbx.auto_hibernate_seconds, 30)
        sbx = self.client().sandboxes.create("base")
        self.assertNotIn("auto_hibernate_seconds", self.srv.created[-1])
        self.assertEqual(sbx.auto_hibernate_seconds, 0)

    def test_exec_stream_callbacks_are_live(self):
        sbx = self.client().sandboxes.connect("sbx_1")
        t0, times = time.monotonic(), []
        r = sbx.exec("slow", on_stdout=lambda s: times.append(time.monotonic() - t0))
        end = time.monotonic() - t0
        self.assertEqual(r.stdout, "tick 0\ntick 1\ntick 2\n")
        self.assertEqual((r.pid, r.exit_code, r.duration_ms), (7, 3, 1.5))
        self.assertEqual(len(times), 3)
        self.assertLess(times[0], end - 0.5, "first chunk arrived before the command ended")

    def test_exec_utf8_split_and_bytes(self):
        sbx = self.client().sandboxes.connect("sbx_1")
        chunks, raw = [], []
        r = sbx.exec("split", on_stdout=chunks.append, on_stdout_bytes=raw.append,
                     env={"A": "1"}, cwd="/w", stdin="in", timeout_seconds=5)
        self.assertEqual(r.stdout_bytes, "a€".encode() + b"b\xff")
        self.assertEqual(r.stdout, "a€b\ufffd")
        self.assertEqual("".join(chunks), "a€b\ufffd")
        self.assertNotIn("\ufffd", chunks[0])  # the split character was not mangled
        self.assertEqual(b"".join(raw), r.stdout_bytes)
        self.assertEqual(r.stderr, "err")
        self.assertEqual(self.srv.exec_bodies[-1], {"cmd": "split", "env": {"A": "1"}, "cwd": "/w",
                                                    "timeout_seconds": 5, "stdin_base64": b64(b"in")})
        sbx.exec(["echo", "a b"])
        self.assertEqual(self.srv.exec_bodies[-1], {"args": ["echo", "a b"]})

    def test_exec_stream_error_and_cut(self):
        sbx = self.client().sandboxes.connect("sbx_1")
        with self.assertRaises(GoneError) as cm:
            sbx.exec("error")
        self.assertEqual((cm.exception.status, cm.exception.request_id), (None, "req-stream"))
        with self.assertRaises(APIConnectionError):
            sbx.exec("cut")

    def test_read_code_stream(self):
        lines = [b'{"type":"stdout","text":"a"}', b'{"type":"stderr","text":"b"}',
                 b'{"type":"result","result":{"text":"<Figure>","png":"iVBORw0K","is_main_result":false}}',
                 b'{"type":"result","result":{"text":"3","is_main_result":true}}',
                 b'{"type":"error","error":{"name":"E","value":"v","traceback":["t1\\n","t2\\n"]}}',
                 b'{"type":"end","execution_count":4}']
        got = []
        ex = read_code_stream(lines, "req", on_stdout=got.append, on_result=got.append)
        self.assertEqual(ex.text, "3")
        self.assertEqual((ex.logs.stdout, ex.logs.stderr, ex.execution_count), (["a"], ["b"], 4))
        self.assertEqual(ex.results[0].png_bytes[:4], b"\x89PNG")
        self.assertEqual((ex.error.name, ex.error.value, ex.error.traceback), ("E", "v", "t1\nt2\n"))
        self.assertEqual(got[0], "a")
        with self.assertRaises(pandastack.UnavailableError):
            read_code_stream([b'{"type":"abort","abort":{"code":"unavailable","message":"lost"}}'], "r")
        with self.assertRaises(pandastack.APIConnectionError):
            read_code_stream([b'{"type":"stdout","text":"a"}'], "r")

    def test_read_exec_stream_parsing(self):
        lines = [line({"type": "start", "pid": 3}), line({"type": "future", "x": 1}),
                 line({"type": "stderr", "data": b64(b"e")}),
                 line({"type": "exit", "result": {"exit_code": 137, "signal": "SIGKILL",
                                                  "timed_out": True, "duration_ms": 10}})]
        r = read_exec_stream(lines, discard_output=True, on_stderr=lambda s: None)
        self.assertEqual((r.pid, r.exit_code, r.signal, r.timed_out, r.stderr), (3, 137, "SIGKILL", True, ""))
        self.assertFalse(r.ok)
        with self.assertRaises(APIConnectionError):
            read_exec_stream([b"not json\n"])
        with self.assertRaises(InternalServerError):
            read_exec_stream([line({"type": "error"})])

    def test_callback_exception_propagates(self):
        sbx = self.client().sandboxes.connect("sbx_1")

        def boom(s):
            raise KeyError("stop")
        with self.assertRaises(KeyError):
            sbx.exec("slow", on_stdout=boom)
        self.assertEqual(sbx.client.health(), {"status": "ok"})  # the client still works

    def test_chunked_upload_from_file(self):
        sbx = self.client().sandboxes.connect("sbx_1")
        data = os.urandom(3 << 20)
        fi = sbx.filesystem.write("/f", io.BytesIO(data), mode=0o755)
        self.assertEqual(fi.size, len(data))
        method, path, headers = self.srv.requests[-1]
        self.assertEqual(headers.get("Transfer-Encoding"), "chunked")
        self.assertIn("mode=0755", path)
        self.assertIn("path=%2Ff", path)
        self.assertEqual(sbx.filesystem.write("/f", "hé").size, 3)

    def test_download_cut_short(self):
        sbx = self.client().sandboxes.connect("sbx_1")
        with self.assertRaises(APIConnectionError):
            sbx.filesystem.read_bytes("/f")

    def test_unserved_routes_surface_typed_errors(self):
        sbx = self.client().sandboxes.connect("sbx_1")
        with self.assertRaises(MethodNotAllowedError):
            sbx.snapshot()
        with self.assertRaises(MethodNotAllowedError):
            sbx.fork()
        with self.assertRaises(NotFoundError):
            sbx.hibernate()
        with self.assertRaises(NotFoundError):
            sbx.wake()

    def test_client_timeout(self):
        with self.assertRaises(RequestTimeoutError) as cm:
            self.client(timeout=0.2)._t.call("GET", "/v1/slow")
        self.assertIsInstance(cm.exception, TimeoutError)

    def test_connection_refused(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        with self.assertRaises(APIConnectionError) as cm:
            PandaStack(token="x", base_url=f"http://127.0.0.1:{port}").health()
        self.assertIsInstance(cm.exception, UnavailableError)

    def test_async_callbacks_on_loop(self):
        async def main():
            c = AsyncPandaStack(token="pds_test", base_url=self.url)
            sbx = c.sandboxes.connect("sbx_1")
            loop_thread = threading.get_ident()
            seen = []
            r = await sbx.exec("slow", on_stdout=lambda s: seen.append((s, threading.get_ident())))
            self.assertEqual([s for s, _ in seen], ["tick 0\n", "tick 1\n", "tick 2\n"])
            self.assertTrue(all(t == loop_thread for _, t in seen))
            self.assertEqual(r.exit_code, 3)

            def boom(s):
                raise KeyError("stop")
            with self.assertRaises(KeyError):
                await sbx.exec("split", on_stdout=boom)
        asyncio.run(main())


if __name__ == "__main__":
    unittest.main()


class BuildContextTest(unittest.TestCase):
    def test_pack_build_context(self):
        import tarfile
        import tempfile
        from pandastack.client import pack_build_context
        with tempfile.TemporaryDirectory() as d:
            os.makedirs(os.path.join(d, "app"))
            with open(os.path.join(d, "app", "main.py"), "w") as f:
                f.write("print(1)\n")
            os.symlink("/etc/passwd", os.path.join(d, "leak"))
            data = pack_build_context("FROM base\nCOPY app /app\n", d)
        with tarfile.open(fileobj=io.BytesIO(data)) as tf:
            names = {m.name: m for m in tf.getmembers()}
            self.assertEqual(tf.extractfile(".pandastack-spec").read(), b"FROM base\nCOPY app /app\n")
            self.assertEqual(tf.extractfile("app/main.py").read(), b"print(1)\n")
            self.assertTrue(names["leak"].issym())  # sent as a link, not followed
            self.assertEqual(names["leak"].linkname, "/etc/passwd")
class NetworkTest(unittest.TestCase):
    def test_get_host_uses_the_server_domain(self):
        c = PandaStack(token="pds_test", base_url="http://127.0.0.1:1")
        sb = Sandbox(c, {"id": "sbx_1", "domain": "sandboxes.example.com", "network": {"egress": "deny"}})
        self.assertEqual(sb.get_host(8080), "8080-sbx_1.sandboxes.example.com")
        self.assertEqual(sb.network, {"egress": "deny"})
        old = Sandbox(c, {"id": "sbx_2"})  # a server that reports no domain
        self.assertEqual(old.get_host(3000), "3000-sbx_2.localhost")
        self.assertIsNone(old.network)
