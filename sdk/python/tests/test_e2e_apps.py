"""App hosting end to end against a real server (scripts/with-server):
a real ``git push`` to the app's own remote deploys a Python
standard-library app, built in a microVM and served by Host header
through the API port; a second push switches; rollback serves the first
release again. Skipped when PANDASTACK_BASE_URL is not set."""

import _support  # noqa: F401  (sys.path)

import http.client
import os
import subprocess
import tempfile
import time
import unittest
import uuid
from urllib.parse import urlsplit

from pandastack import ConflictError, NotFoundError, PandaStack

HAVE_SERVER = bool(os.environ.get("PANDASTACK_BASE_URL") and os.environ.get("PANDASTACK_API_KEY"))

APP = '''import http.server, os
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"python sdk VERSION"
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(("", int(os.environ["PORT"])), H).serve_forever()
'''


def git(cwd, *args):
    env = dict(os.environ, GIT_AUTHOR_NAME="sdk", GIT_AUTHOR_EMAIL="sdk@localhost", GIT_COMMITTER_NAME="sdk",
               GIT_COMMITTER_EMAIL="sdk@localhost", GIT_CONFIG_NOSYSTEM="1", HOME=cwd,
               GIT_TERMINAL_PROMPT="0", GIT_ASKPASS="/bin/false")
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True)


@unittest.skipUnless(HAVE_SERVER, "needs a server: run under scripts/with-server")
class AppsE2E(unittest.TestCase):
    def get(self, app, path="/"):
        """GET path from the server with the app's Host header."""
        base = urlsplit(os.environ["PANDASTACK_BASE_URL"])
        conn = http.client.HTTPConnection(base.hostname, base.port, timeout=60)
        try:
            conn.request("GET", path, headers={"Host": urlsplit(app["url"]).netloc})
            r = conn.getresponse()
            return r.status, r.read().decode()
        finally:
            conn.close()

    def push(self, c, work, name, version):
        """Commits the app at version, pushes it to the app's remote and
        waits for the deploy the push queued."""
        with open(os.path.join(work, "main.py"), "w") as f:
            f.write(APP.replace("VERSION", version))
        git(work, "add", "-A")
        git(work, "commit", "--quiet", "-m", version)
        before = {d["id"] for d in c.apps.deploys(name)}
        git(work, "push", "--quiet", c.apps.git_remote_url(name, with_key=True), "main")
        new = [d for d in c.apps.deploys(name) if d["id"] not in before]
        self.assertEqual(len(new), 1, "one push, one deploy")
        d = c.apps.wait_deploy(name, new[0]["id"], timeout=600)
        self.assertEqual((d["status"], d["framework"]), ("live", "python"), d.get("log"))
        return d

    def test_apps_push_deploy_rollback(self):
        c = PandaStack()
        name = "py-sdk-" + uuid.uuid4().hex[:6]
        a = c.apps.create(name, health_timeout_seconds=60)
        self.addCleanup(lambda: c.apps.delete(name) if name in {x["name"] for x in c.apps.list()} else None)
        self.assertEqual((a["name"], a["git_remote"], a["git_url"]), (name, f"/git/{name}.git", ""))
        self.assertTrue(a["webhook_secret"].startswith("whsec_"))
        with self.assertRaises(ConflictError):
            c.apps.create(name)
        with self.assertRaises(ConflictError):  # nothing pushed yet
            c.apps.deploy(name)
        self.assertIn(name, [x["name"] for x in c.apps.list()])

        with tempfile.TemporaryDirectory() as work:
            git(work, "init", "--quiet", "--initial-branch=main", ".")
            first = self.push(c, work, name, "v1")
            self.assertEqual(len(first["commit"]), 40)
            self.assertEqual(self.get(a), (200, "python sdk v1"))
            second = self.push(c, work, name, "v2")
            self.assertEqual(self.get(a), (200, "python sdk v2"))
        self.assertEqual(c.apps.get(name)["live_deploy_id"], second["id"])
        self.assertEqual(c.apps.get_deploy(name, first["id"])["status"], "superseded")
        self.assertIn("framework python", c.apps.logs(name, second["id"]))

        back = c.apps.rollback(name)
        self.assertEqual((back["id"], back["status"]), (first["id"], "live"))
        deadline = time.monotonic() + 60
        while self.get(a) != (200, "python sdk v1") and time.monotonic() < deadline:
            time.sleep(0.2)
        self.assertEqual(self.get(a), (200, "python sdk v1"))
        self.assertEqual(c.apps.get(name)["live_deploy_id"], first["id"])

        c.apps.delete(name)
        with self.assertRaises(NotFoundError):
            c.apps.get(name)


if __name__ == "__main__":
    unittest.main()
