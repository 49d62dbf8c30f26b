"""``client.apps``: git-driven app hosting."""

from __future__ import annotations

import time
from typing import Any, Dict, List, Optional
from urllib.parse import quote, urlsplit, urlunsplit

from . import errors

#: Deploy statuses; the last three are final.
DEPLOY_QUEUED = "queued"
DEPLOY_BUILDING = "building"
DEPLOY_DEPLOYING = "deploying"
DEPLOY_LIVE = "live"
DEPLOY_FAILED = "failed"
DEPLOY_SUPERSEDED = "superseded"
_DONE = (DEPLOY_LIVE, DEPLOY_FAILED, DEPLOY_SUPERSEDED)


class Apps:
    """``client.apps``: git repositories served at ``NAME.apps.DOMAIN``.
    Each deploy clones the app's repository (its ``git_url``, or what was
    pushed to its own git remote), detects the framework, builds it in a
    microVM and releases it as a memory snapshot of the running app.

    An app is a dict with ``id``, ``name``, ``git_url``, ``branch``,
    ``env_keys``, ``health_path``, ``health_timeout_seconds``,
    ``auto_hibernate_seconds``, ``live_deploy_id``, ``url``,
    ``webhook_url``, ``git_remote``, ``created_at`` (and
    ``build_command``, ``start_command``, ``port`` when set); create adds
    ``webhook_secret``. A deploy is a dict with ``id``, ``app_id``,
    ``status`` (queued, building, deploying, live, failed, superseded),
    ``ref``, ``commit``, ``framework``, ``error``, ``created_at``,
    ``updated_at``; :meth:`get_deploy` adds ``log``."""

    def __init__(self, client: Any):
        self._c = client

    def create(self, name: str, git_url: Optional[str] = None, *, branch: Optional[str] = None,
               env: Optional[Dict[str, str]] = None, build_command: Optional[str] = None,
               start_command: Optional[str] = None, port: Optional[int] = None,
               health_path: Optional[str] = None, health_timeout_seconds: Optional[int] = None,
               auto_hibernate_seconds: Optional[int] = None) -> Dict[str, Any]:
        """Records an app (nothing is built until a deploy). Without
        ``git_url`` the app is deployed by pushing to its git remote
        (:meth:`git_remote_url`). ``env`` values are sealed at rest and
        masked in build logs; the other settings override what detection
        finds. ConflictError for a taken name, InvalidArgumentError for a
        bad one, PermissionDeniedError for a git URL on the server's own
        networks."""
        body: Dict[str, Any] = {"name": name}
        for k, v in (("git_url", git_url), ("branch", branch), ("env", env),
                     ("build_command", build_command), ("start_command", start_command),
                     ("port", port), ("health_path", health_path),
                     ("health_timeout_seconds", health_timeout_seconds),
                     ("auto_hibernate_seconds", auto_hibernate_seconds)):
            if v is not None:
                body[k] = v
        return self._c._t.call("POST", "/v1/apps", json_body=body)

    def list(self) -> List[Dict[str, Any]]:
        """The team's apps, oldest first."""
        return list(self._c._t.call("GET", "/v1/apps").get("apps") or [])

    def get(self, name: str) -> Dict[str, Any]:
        return self._c._t.call("GET", _path(name))

    def delete(self, name: str) -> None:
        """Deletes an app with its route, machines, snapshots and git
        remote."""
        self._c._t.call("DELETE", _path(name))

    def deploy(self, name: str, ref: Optional[str] = None) -> Dict[str, Any]:
        """Queues a deploy of the app's branch (or ``ref``, a branch or
        tag) and returns it, queued; :meth:`wait_deploy` waits for it.
        ConflictError for an app with no git URL and nothing pushed yet."""
        body = {"ref": ref} if ref else None
        return self._c._t.call("POST", _path(name) + "/deploys", json_body=body)

    def deploys(self, name: str) -> List[Dict[str, Any]]:
        """The app's deploys, newest first, without logs."""
        return list(self._c._t.call("GET", _path(name) + "/deploys").get("deploys") or [])

    def previews(self, name: str) -> List[Dict[str, Any]]:
        """The app's pull request previews, by number: each served at its
        ``url`` (pr-N--NAME.apps.DOMAIN) until the pull request closes.
        GitHub's pull_request webhook opens, updates and removes them; their
        deploys are the app's deploys with ``preview`` set to the number."""
        return list(self._c._t.call("GET", _path(name) + "/previews").get("previews") or [])

    def get_deploy(self, name: str, deploy_id: str) -> Dict[str, Any]:
        """A deploy with its log so far."""
        return self._c._t.call("GET", _deploy_path(name, deploy_id))

    def logs(self, name: str, deploy_id: str) -> str:
        """A deploy's build log as text (env values masked)."""
        resp = self._c._t.request("GET", _deploy_path(name, deploy_id) + "/logs", accept="text/plain")
        try:
            return resp.read().decode("utf-8", "replace")
        finally:
            resp.close()

    def wait_deploy(self, name: str, deploy_id: str, *, timeout: Optional[float] = 900.0,
                    poll_interval: float = 1.0) -> Dict[str, Any]:
        """Polls a deploy until it is live, failed or superseded and
        returns it (with its log). A failed deploy is returned, not
        raised: its ``error`` says why. RequestTimeoutError when it is
        still running after ``timeout`` seconds (None: no bound)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            d = self.get_deploy(name, deploy_id)
            if d.get("status") in _DONE:
                return d
            if deadline is not None and time.monotonic() >= deadline:
                raise errors.RequestTimeoutError(
                    f"deploy {deploy_id} of app {name} still {d.get('status')} after {timeout}s")
            time.sleep(poll_interval)

    def rollback(self, name: str, deploy_id: Optional[str] = None) -> Dict[str, Any]:
        """Serves a previous release again (``deploy_id``'s, by default the
        one live before the current one) and returns that deploy, live.
        The release is kept warm or hibernated, so nothing is rebuilt."""
        body = {"deploy_id": deploy_id} if deploy_id else None
        return self._c._t.call("POST", _path(name) + "/rollback", json_body=body)

    def git_remote_url(self, name: str, *, with_key: bool = False) -> str:
        """The URL of the app's own git remote: ``git push URL BRANCH``
        deploys. Git's password is the API key (any user name); with
        ``with_key`` it is put in the URL (keep such a URL secret)."""
        a = self.get(name)
        u = urlsplit(self._c.base_url)
        netloc = u.netloc
        if with_key and self._c.token:
            netloc = "pandastack:" + quote(self._c.token, safe="") + "@" + netloc
        return urlunsplit((u.scheme, netloc, u.path.rstrip("/") + a["git_remote"], "", ""))


def _path(name: str) -> str:
    return "/v1/apps/" + quote(name, safe="")


def _deploy_path(name: str, deploy_id: str) -> str:
    return _path(name) + "/deploys/" + quote(deploy_id, safe="")
