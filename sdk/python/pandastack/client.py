"""The synchronous PandaStack client."""

from __future__ import annotations

import base64
import io
import json
import os
import threading
from datetime import datetime
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Union
from urllib.parse import quote

from . import errors
from ._http import CHUNK, Transport, iter_file
from ._code import Execution, read_code_stream
from ._apps import Apps
from ._databases import Databases
from ._models import (CreatedKey, ExecResult, FileInfo, Key, ProcessInfo, Snapshot, Template,
                      parse_time, read_exec_stream)
from ._version import __version__

DEFAULT_BASE_URL = "http://localhost:8080"
DEFAULT_TIMEOUT = 120.0
NDJSON = "application/x-ndjson"

StrCallback = Optional[Callable[[str], Any]]
BytesCallback = Optional[Callable[[bytes], Any]]


class PandaStack:
    """A client for a PandaStack server.

    ``token`` defaults to ``$PANDASTACK_API_KEY`` (then ``$PANDASTACK_TOKEN``),
    ``base_url`` to ``$PANDASTACK_BASE_URL`` (then http://localhost:8080).
    ``timeout`` (seconds) bounds connecting and each wait for data on ordinary
    calls; command streams wait as long as the command runs. A client is
    safe to share between threads (each thread uses its own connections).
    """

    def __init__(self, token: Optional[str] = None, base_url: Optional[str] = None, *,
                 api_key: Optional[str] = None, timeout: Optional[float] = DEFAULT_TIMEOUT,
                 ssl_context: Any = None):
        token = token or api_key or os.environ.get("PANDASTACK_API_KEY") \
            or os.environ.get("PANDASTACK_TOKEN") or None
        base_url = (base_url or os.environ.get("PANDASTACK_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        self.token = token
        self.base_url = base_url
        self.timeout = timeout
        self._t = Transport(base_url, token, timeout, f"pandastack-python/{__version__}", ssl_context)
        self.sandboxes = Sandboxes(self)
        self.volumes = Volumes(self)
        self.databases = Databases(self)
        self.apps = Apps(self)

    def __repr__(self) -> str:
        return f"PandaStack(base_url={self.base_url!r})"

    def close(self) -> None:
        """Closes the calling thread's idle connections (others close when
        garbage-collected)."""
        self._t.close()

    def __enter__(self) -> "PandaStack":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- server-wide calls -------------------------------------------------

    def health(self) -> Dict[str, Any]:
        """``{"status","version","accel","isolation"}``; needs no key."""
        return self._t.call("GET", "/v1/health")

    def ca_certificate(self) -> str:
        """The PEM certificate of the server's own CA, which signs the
        certificates of its TLS listener (``--tls-listen``): trust it with
        ``ssl.create_default_context(cadata=client.ca_certificate())``.
        Needs no key; NotFoundError when the server has no CA."""
        resp = self._t.request("GET", "/v1/ca.pem", accept="application/x-pem-file")
        try:
            return resp.read().decode("ascii", "replace")
        finally:
            resp.close()

    def templates(self) -> List[Template]:
        """The templates sandboxes can be created from."""
        out = self._t.call("GET", "/v1/templates")
        return [Template.from_dict(d) for d in out.get("templates") or []]

    def build_template(self, name: str, on_log: StrCallback = None, *,
                       spec: Union[str, bytes, None] = None, context_dir: Optional[str] = None,
                       tag: Optional[str] = None, cpus: Optional[int] = None,
                       memory_mib: Optional[int] = None,
                       disk_gib: Optional[int] = None, team: Optional[str] = None) -> Template:
        """Builds (or rebuilds) a template, streaming its log lines to
        ``on_log``. Without ``spec``, rebuilds a catalog template (admin
        keys only). With ``spec`` (the text of a spec file), builds a custom
        template from it, ``context_dir`` being what COPY reads (uploaded
        whole): any key builds for its own team (the name is the team's;
        public names are reserved, ConflictError); an admin key builds for
        the public catalog, or for ``team`` (a team name; NotFoundError if
        there is none). A team key naming another team gets
        PermissionDeniedError; a team at its ``max_concurrent_builds``
        QuotaExceededError."""
        body = None
        query: Dict[str, str] = {}
        if spec is not None:
            body = pack_build_context(spec, context_dir)
            for k, v in (("tag", tag), ("cpus", cpus), ("memory_mib", memory_mib),
                         ("disk_gib", disk_gib), ("team", team)):
                if v is not None:
                    query[k] = str(v)
        resp = self._t.request("POST", "/v1/templates/" + quote(name, safe="") + "/build",
                               accept=NDJSON, timeout=None, body=body, query=query or None,
                               content_type="application/x-tar")
        try:
            for line in resp.lines():
                ev = json.loads(line)
                typ = ev.get("type")
                if typ == "log" and on_log is not None:
                    on_log(ev.get("line", ""))
                elif typ == "done":
                    return Template.from_dict(ev.get("template") or {})
                elif typ == "error":
                    e = ev.get("error") or {}
                    raise errors.make_error(e.get("code"), e.get("message", ""), None, resp.request_id)
            raise errors.APIConnectionError(f"build stream of {name} ended early",
                                            request_id=resp.request_id)
        finally:
            resp.close()

    def template_versions(self, name: str) -> List[Dict[str, Any]]:
        """A template's versions, oldest first (``version``, ``id``, ``tags``, ...).
        Create from one with ``template="NAME:VERSION"`` or ``"NAME:TAG"``."""
        out = self._t.call("GET", "/v1/templates/" + quote(name, safe="") + "/versions")
        return list(out.get("versions") or [])

    def export_snapshot(self, snapshot_id: str) -> Snapshot:
        """Exports a snapshot (RAM, disk, device state, machine, with a
        manifest of SHA-256 sums) to the server's object storage
        (``--object-store``) and returns it with ``object_key`` and
        ``exported_at`` set; an exported one answers at once. Waits as long
        as the upload takes (no client timeout). NotFoundError for another
        team's or a missing snapshot; UnavailableError when the store
        fails."""
        d = self._t.call("POST", "/v1/snapshots/" + quote(snapshot_id, safe="") + "/export",
                         timeout=None)
        return Snapshot.from_dict(d or {})

    def import_snapshot(self, object_key: str, name: Optional[str] = None) -> Snapshot:
        """Makes a snapshot of the caller's team from the export at
        ``object_key`` (an ``object_key`` of :meth:`export_snapshot`, also
        another server's sharing the store), every file's size and SHA-256
        checked first. It keeps the exported id unless this server has a
        snapshot with it, and the exported name unless ``name`` is given
        (ConflictError when the name is taken). NotFoundError when there is
        no such export (a team key finds only its own team's);
        UnavailableError when an object is missing, truncated or altered
        (nothing is left). Waits as long as the download takes."""
        body: Dict[str, Any] = {"object_key": object_key}
        if name:
            body["name"] = name
        d = self._t.call("POST", "/v1/snapshots", json_body=body, timeout=None)
        return Snapshot.from_dict(d or {})

    def create_key(self, team: str, name: Optional[str] = None) -> CreatedKey:
        """Creates an API key for a team (created if absent). Admin keys only."""
        body: Dict[str, Any] = {"team": team}
        if name:
            body["name"] = name
        d = self._t.call("POST", "/v1/keys", json_body=body)
        return CreatedKey(**{k: d.get(k) for k in CreatedKey.__dataclass_fields__})

    def list_keys(self, team: Optional[str] = None) -> List[Key]:
        """API keys (never their secrets), revoked ones included, oldest
        first. An admin key lists every team's (or ``team``'s, an id or
        name); any other key its own team's."""
        out = self._t.call("GET", "/v1/keys", query={"team": team} if team else None)
        return [Key.from_dict(d) for d in out.get("keys") or []]

    def revoke_key(self, key_id: str) -> None:
        """Revokes a key: it fails with AuthenticationError from its next
        request on. An admin key may revoke any key, any other its own team's."""
        self._t.call("DELETE", "/v1/keys/" + quote(key_id, safe=""))

    def rotate_key(self, key_id: str) -> CreatedKey:
        """Replaces a key with a new one of the same team, name and role and
        revokes the old one; ``.key`` of the answer is the new secret."""
        d = self._t.call("POST", "/v1/keys/" + quote(key_id, safe="") + "/rotate")
        return CreatedKey(**{k: d.get(k) for k in CreatedKey.__dataclass_fields__})

    def quotas(self, team: Optional[str] = None) -> Dict[str, Any]:
        """A team's limits (0: none), ``overridden`` (set for the team; the
        rest are the server's defaults) and ``usage``. Without ``team``, the
        key's own team; a ``team`` (id or name) needs an admin key."""
        if team is None:
            return self._t.call("GET", "/v1/quotas")
        return self._t.call("GET", "/v1/teams/" + quote(team, safe="") + "/quotas")

    def set_quotas(self, team: str, **limits: Optional[float]) -> Dict[str, Any]:
        """Changes a team's limits (admin keys only), e.g.
        ``set_quotas("acme", max_sandboxes=50, requests_per_second=20)``; a
        limit given as None goes back to the server's default; 0 is no limit.
        Returns the team's quotas after the change."""
        if not limits:
            raise errors.InvalidArgumentError("set_quotas: name at least one limit")
        return self._t.call("PUT", "/v1/teams/" + quote(team, safe="") + "/quotas", json_body=limits)


class Sandboxes:
    """``client.sandboxes``: create, get and list sandboxes."""

    def __init__(self, client: PandaStack):
        self._c = client

    def create(self, template: str = "base", *, ttl_seconds: Optional[int] = None,
               metadata: Optional[Dict[str, str]] = None,
               env: Optional[Dict[str, str]] = None,
               snapshot: Optional[str] = None, cpus: Optional[int] = None,
               memory_mib: Optional[int] = None,
               disk_gib: Optional[int] = None,
               network: Optional[Dict[str, Any]] = None,
               auto_hibernate_seconds: Optional[int] = None,
               volumes: Optional[Dict[str, str]] = None,
               lifetime: Optional[str] = None,
               on_expiry: Optional[str] = None) -> "Sandbox":
        """Starts a sandbox from a template, or from a snapshot id (running
        when this returns). ``volumes`` maps durable volumes (name or id) to
        mount paths, e.g. ``{"data": "/data"}`` (at most two). ``cpus``/``memory_mib``/``disk_gib`` ask for
        another size than the template's (baked once on first use).
        ``network`` is its policy, e.g.
        ``{"allow_domains": ["pypi.org", "*.pythonhosted.org"], "public_ports": [8080]}``
        (keys: egress "allow"/"deny", allow_cidrs, deny_cidrs, allow_domains,
        public_ports). ``auto_hibernate_seconds`` hibernates it after that
        many seconds without an exec, file, port or run_code request (any
        later use wakes it). ``lifetime="service"`` makes a service machine:
        no TTL (leave ``ttl_seconds`` out; ``expires_at`` is None), never
        reaped, re-attached after server restarts, listed by
        :meth:`machines` and capped per team. ``on_expiry="hibernate"``
        hibernates it when its TTL runs out instead of ending it (E2B's
        autoPause): it sleeps until woken (it then gets its TTL again) or
        killed."""
        body: Dict[str, Any] = {"template": template}
        if lifetime:
            body["lifetime"] = lifetime
        if on_expiry:
            body["on_expiry"] = on_expiry
        if auto_hibernate_seconds is not None:
            body["auto_hibernate_seconds"] = auto_hibernate_seconds
        if cpus:
            body["cpus"] = cpus
        if memory_mib:
            body["memory_mib"] = memory_mib
        if disk_gib:
            body["disk_gib"] = disk_gib
        if network is not None:
            body["network"] = dict(network)
        if volumes:
            body["volumes"] = [{"volume": v, "path": p} for v, p in volumes.items()]
        if snapshot:
            body["snapshot"] = snapshot
        if ttl_seconds is not None:
            body["ttl_seconds"] = ttl_seconds
        if metadata:
            body["metadata"] = dict(metadata)
        if env:
            body["env"] = dict(env)
        return Sandbox(self._c, self._c._t.call("POST", "/v1/sandboxes", json_body=body))

    def get(self, sandbox_id: str) -> "Sandbox":
        """Fetches a sandbox, live or ended."""
        return Sandbox(self._c, self._c._t.call("GET", _sandbox_path(sandbox_id)))

    def connect(self, sandbox_id: str) -> "Sandbox":
        """A handle on a sandbox without fetching it (fields empty until refresh())."""
        return Sandbox(self._c, {"id": sandbox_id})

    def list(self, *, metadata: Optional[Dict[str, str]] = None,
             all: bool = False) -> List["Sandbox"]:
        """The team's sandboxes, oldest first: live ones, or ``all=True``
        to include ended ones. ``metadata`` filters (all must match)."""
        q: Dict[str, str] = {}
        if all:
            q["state"] = "all"
        for k, v in (metadata or {}).items():
            q["metadata." + k] = v
        out = self._c._t.call("GET", "/v1/sandboxes", query=q or None)
        return [Sandbox(self._c, d) for d in out.get("sandboxes") or []]

    def machines(self, *, all: bool = False) -> List["Sandbox"]:
        """The team's service machines (``lifetime="service"``), oldest
        first: live ones, or ``all=True`` to include ended ones (one whose
        VM did not survive a restart is "failed", with ``end_reason``)."""
        out = self._c._t.call("GET", "/v1/machines", query={"state": "all"} if all else None)
        return [Sandbox(self._c, d) for d in out.get("machines") or []]


class Volumes:
    """``client.volumes``: durable volumes. Each is a dict with ``id``,
    ``name``, ``size_mib``, ``sandbox_id`` (the live sandbox holding it, or
    ""), ``mount_path``, ``created_at``; mount one with
    ``sandboxes.create(..., volumes={"data": "/data"})``."""

    def __init__(self, client: PandaStack):
        self._c = client

    def create(self, name: str, size_mib: int) -> Dict[str, Any]:
        """Makes an empty volume (16 MiB to 1 TiB). InsufficientStorageError
        when the host's disk has less free; ConflictError for a taken name."""
        return self._c._t.call("POST", "/v1/volumes", json_body={"name": name, "size_mib": size_mib})

    def list(self) -> List[Dict[str, Any]]:
        """The team's volumes, oldest first."""
        return list(self._c._t.call("GET", "/v1/volumes").get("volumes") or [])

    def get(self, id_or_name: str) -> Dict[str, Any]:
        return self._c._t.call("GET", "/v1/volumes/" + quote(id_or_name, safe=""))

    def delete(self, id_or_name: str) -> None:
        """Deletes a volume and its data; ConflictError while a live sandbox
        holds it."""
        self._c._t.call("DELETE", "/v1/volumes/" + quote(id_or_name, safe=""))


def _sandbox_path(sandbox_id: str) -> str:
    return "/v1/sandboxes/" + quote(sandbox_id, safe="")


_default_lock = threading.Lock()
_default_clients: Dict[Any, PandaStack] = {}


def default_client() -> PandaStack:
    """The client configured from the environment, as it is now."""
    key = (os.environ.get("PANDASTACK_API_KEY") or os.environ.get("PANDASTACK_TOKEN"),
           os.environ.get("PANDASTACK_BASE_URL"))
    with _default_lock:
        c = _default_clients.get(key)
        if c is None:
            c = _default_clients[key] = PandaStack()
        return c


class Sandbox:
    """A microVM and a handle to operate on it. Its attributes are a snapshot
    from the server; :meth:`refresh` updates them. ``with Sandbox.create()
    as sbx:`` kills the sandbox at the end of the block."""

    id: str
    team_id: str
    template: str
    template_id: str
    state: str           # starting, running, killed, expired, failed
    host: str
    accel: str           # kvm or tcg
    metadata: Dict[str, str]
    env: Dict[str, str]
    cpus: int
    memory_mib: int
    created_at: Optional[datetime]
    expires_at: Optional[datetime]
    ended_at: Optional[datetime]
    end_reason: str
    auto_hibernate_seconds: int  # 0: never
    lifetime: str  # "sandbox", or "service" (no TTL: expires_at is None)
    managed_by: str  # "database:ID", "app:NAME", "function:NAME": changed only through that service; "" for a sandbox

    def __init__(self, client: PandaStack, data: Dict[str, Any]):
        self._client = client
        self._load(data)
        self.filesystem = Filesystem(self)

    def _load(self, d: Dict[str, Any]) -> None:
        self.raw = dict(d)
        self.id = d.get("id", "")
        self.team_id = d.get("team_id", "")
        self.template = d.get("template", "")
        self.template_id = d.get("template_id", "")
        self.state = d.get("state", "")
        self.host = d.get("host", "")
        self.accel = d.get("accel", "")
        self.metadata = dict(d.get("metadata") or {})
        self.env = dict(d.get("env") or {})
        self.cpus = int(d.get("cpus") or 0)
        self.memory_mib = int(d.get("memory_mib") or 0)
        self.created_at = parse_time(d.get("created_at"))
        self.expires_at = parse_time(d.get("expires_at"))
        self.ended_at = parse_time(d.get("ended_at"))
        self.end_reason = d.get("end_reason") or ""
        self.auto_hibernate_seconds = int(d.get("auto_hibernate_seconds") or 0)
        self.lifetime = d.get("lifetime") or "sandbox"
        self.managed_by = d.get("managed_by") or ""
        self.network = dict(d["network"]) if d.get("network") is not None else None
        self.domain = d.get("domain") or "localhost"

    # -- construction --------------------------------------------------------

    @classmethod
    def create(cls, template: str = "base", *, ttl_seconds: Optional[int] = None,
               metadata: Optional[Dict[str, str]] = None, env: Optional[Dict[str, str]] = None,
               snapshot: Optional[str] = None, network: Optional[Dict[str, Any]] = None,
               auto_hibernate_seconds: Optional[int] = None,
               volumes: Optional[Dict[str, str]] = None,
               client: Optional[PandaStack] = None) -> "Sandbox":
        """Starts a sandbox with ``client`` (default: configured from the
        environment, see PandaStack); from a snapshot id when given;
        ``volumes`` maps volume names (or ids) to mount paths."""
        return (client or default_client()).sandboxes.create(
            template, ttl_seconds=ttl_seconds, metadata=metadata, env=env, snapshot=snapshot, network=network,
            auto_hibernate_seconds=auto_hibernate_seconds, volumes=volumes)

    @classmethod
    def get(cls, sandbox_id: str, *, client: Optional[PandaStack] = None) -> "Sandbox":
        """Fetches an existing sandbox."""
        return (client or default_client()).sandboxes.get(sandbox_id)

    @classmethod
    def list(cls, *, metadata: Optional[Dict[str, str]] = None, all: bool = False,
             client: Optional[PandaStack] = None) -> List["Sandbox"]:
        """Lists the team's sandboxes (see Sandboxes.list)."""
        return (client or default_client()).sandboxes.list(metadata=metadata, all=all)

    @property
    def client(self) -> PandaStack:
        return self._client

    @property
    def files(self) -> "Filesystem":
        """Alias of :attr:`filesystem`."""
        return self.filesystem

    @property
    def live(self) -> bool:
        """Whether the sandbox had not ended when last fetched (hibernated counts)."""
        return self.state in ("starting", "running", "hibernated")

    def __repr__(self) -> str:
        return f"Sandbox(id={self.id!r}, template={self.template!r}, state={self.state!r}, accel={self.accel!r})"

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.kill()

    def _path(self, rest: str = "") -> str:
        return _sandbox_path(self.id) + rest

    def _call(self, method: str, rest: str, **kw: Any) -> Any:
        return self._client._t.call(method, self._path(rest), **kw)

    # -- lifecycle -----------------------------------------------------------

    def refresh(self) -> "Sandbox":
        """Reloads the attributes from the server."""
        self._load(self._call("GET", ""))
        return self

    def kill(self) -> None:
        """Ends the sandbox. Killing an ended sandbox is not an error."""
        self._call("DELETE", "")

    def set_ttl(self, ttl_seconds: int) -> "Sandbox":
        """Makes the sandbox expire ``ttl_seconds`` from now (updates expires_at)."""
        self._load(self._call("PUT", "/ttl", json_body={"ttl_seconds": ttl_seconds}))
        return self

    # -- network ---------------------------------------------------------------

    def get_host(self, port: int) -> str:
        """Where ``port`` of the sandbox is served through the server:
        ``PORT-ID.DOMAIN`` (private: send the API key, or use sign_port_url;
        public when listed in the policy's public_ports)."""
        return "%d-%s.%s" % (port, self.id, self.domain)

    def get_network(self) -> Dict[str, Any]:
        """The network policy in force, with ``denied_connections``."""
        return self._call("GET", "/network")

    def set_network(self, policy: Dict[str, Any]) -> Dict[str, Any]:
        """Replaces the network policy; new connections follow it at once."""
        st = self._call("PUT", "/network", json_body=dict(policy))
        self.network = {k: v for k, v in st.items() if k != "denied_connections"}
        return st

    def sign_port_url(self, port: int, expires_in_seconds: Optional[int] = None) -> Dict[str, Any]:
        """A URL reaching ``port`` without an API key until it expires:
        ``{"url", "host", "token", "expires_at"}``."""
        body = {"expires_in_seconds": expires_in_seconds} if expires_in_seconds else None
        return self._call("POST", "/ports/%d/url" % port, json_body=body)

    def ping(self) -> float:
        """One round trip to the guest agent, in milliseconds (measured by the server)."""
        return float(self._call("POST", "/ping")["rtt_ms"])

    def open_terminal(self, cmd: Optional[str] = None, *, rows: int = 24, cols: int = 80,
                      user: Optional[str] = None, cwd: Optional[str] = None,
                      envs: Optional[Dict[str, str]] = None) -> "Terminal":
        """An interactive terminal (the login shell, or ``cmd``) over a
        WebSocket; see ``Terminal``. It reattaches by itself if the
        connection drops."""
        from ._terminal import Terminal
        q: Dict[str, Any] = {"rows": rows, "cols": cols}
        for k, v in (("cmd", cmd), ("user", user), ("cwd", cwd)):
            if v:
                q[k] = v
        if envs:
            q["env"] = [f"{k}={v}" for k, v in envs.items()]
        return Terminal(self, q)

    def reattach_terminal(self, session_id: str, offset: int = 0) -> "Terminal":
        """Connects to a terminal session again (``offset``: bytes already read)."""
        from ._terminal import Terminal
        return Terminal(self, {"session": session_id, "offset": offset}, offset)

    # Routes of the API that not every server serves yet: against a server
    # without them these raise the server's answer (NotFoundError or
    # MethodNotAllowedError).

    def snapshot(self, name: Optional[str] = None) -> Dict[str, Any]:
        """Saves the sandbox whole (memory, processes, disk); it runs on.
        Returns the snapshot (``id``, ``name``, ...); start new sandboxes from
        it with ``Sandbox.create(snapshot=id)``."""
        if name:
            return self._call("POST", "/snapshot", json_body={"name": name}) or {}
        return self._call("POST", "/snapshot") or {}

    def fork(self) -> "Sandbox":
        """POST /v1/sandboxes/{id}/fork; returns the new sandbox."""
        return Sandbox(self._client, self._call("POST", "/fork"))

    def hibernate(self) -> "Sandbox":
        """POST /v1/sandboxes/{id}/hibernate."""
        return self._reload_from(self._call("POST", "/hibernate"))

    def wake(self) -> "Sandbox":
        """POST /v1/sandboxes/{id}/wake."""
        return self._reload_from(self._call("POST", "/wake"))

    def _reload_from(self, d: Any) -> "Sandbox":
        if isinstance(d, dict) and d.get("id") == self.id:
            self._load(d)
        else:
            self.refresh()
        return self

    # -- commands ------------------------------------------------------------

    def exec(self, cmd: Union[str, Sequence[str]], *, background: bool = False,
             env: Optional[Dict[str, str]] = None, cwd: Optional[str] = None,
             user: Optional[str] = None, timeout_seconds: Optional[float] = None,
             stdin: Union[str, bytes, None] = None,
             on_stdout: StrCallback = None, on_stderr: StrCallback = None,
             on_stdout_bytes: BytesCallback = None, on_stderr_bytes: BytesCallback = None,
             discard_output: bool = False) -> Any:
        """Runs a command and waits for it to end; returns an ExecResult.

        ``cmd`` is a string run with ``bash -c`` (``/bin/sh -c`` in an image without bash), or a list (argv) run
        without a shell. Output always streams: ``on_stdout``/``on_stderr``
        get ``str`` chunks as they are produced (``*_bytes`` variants get the
        raw bytes). A non-zero exit or a timeout is not an exception (see
        ``result.exit_code``, ``result.timed_out``). ``discard_output``
        keeps nothing in the result (the callbacks still fire).

        With ``background=True`` the command keeps running after the call
        and a :class:`BackgroundProcess` (``.pid``) is returned at once.
        """
        body: Dict[str, Any] = {}
        if isinstance(cmd, str):
            body["cmd"] = cmd
        else:
            body["args"] = [str(a) for a in cmd]
        if env:
            body["env"] = dict(env)
        if cwd:
            body["cwd"] = cwd
        if user:
            body["user"] = user
        if timeout_seconds:
            body["timeout_seconds"] = timeout_seconds
        if stdin is not None:
            if isinstance(stdin, str):
                stdin = stdin.encode("utf-8")
            body["stdin_base64"] = base64.b64encode(stdin).decode("ascii")
        if background:
            body["background"] = True
            out = self._call("POST", "/exec", json_body=body)
            return BackgroundProcess(self, int(out["pid"]))
        resp = self._client._t.request("POST", self._path("/exec"), json_body=body,
                                       accept=NDJSON, timeout=None)
        return self._follow(resp, on_stdout, on_stderr, on_stdout_bytes, on_stderr_bytes,
                            discard_output)

    def _follow(self, resp: Any, on_stdout: StrCallback, on_stderr: StrCallback,
                on_stdout_bytes: BytesCallback, on_stderr_bytes: BytesCallback,
                discard_output: bool) -> ExecResult:
        # Leaving early (a callback raised, KeyboardInterrupt, ...) closes
        # the connection, which kills a foreground command.
        try:
            res = read_exec_stream(resp.lines(), resp.request_id, on_stdout=on_stdout,
                                   on_stderr=on_stderr, on_stdout_bytes=on_stdout_bytes,
                                   on_stderr_bytes=on_stderr_bytes, discard_output=discard_output)
            try:
                resp.read()  # the end of the chunked body, so the connection is reused
            except errors.PandaStackError:
                pass
            return res
        finally:
            resp.close()

    def attach(self, pid: int, *, on_stdout: StrCallback = None, on_stderr: StrCallback = None,
               on_stdout_bytes: BytesCallback = None, on_stderr_bytes: BytesCallback = None,
               discard_output: bool = False) -> ExecResult:
        """Follows a process's output (replaying what the guest kept) until it
        exits, and returns how it ended. Interrupting detaches without
        killing it."""
        resp = self._client._t.request("GET", self._path(f"/processes/{int(pid)}/stream"),
                                       accept=NDJSON, timeout=None)
        return self._follow(resp, on_stdout, on_stderr, on_stdout_bytes, on_stderr_bytes,
                            discard_output)

    def signal(self, pid: int, signal: Union[str, int] = "TERM") -> None:
        """Sends a signal ("TERM", "SIGKILL", "9", ...) to a process."""
        self._call("POST", f"/processes/{int(pid)}/signal", json_body={"signal": str(signal)})

    def processes(self) -> List[ProcessInfo]:
        """The commands started in the sandbox, by pid."""
        out = self._call("GET", "/processes")
        return [ProcessInfo.from_dict(d) for d in out.get("processes") or []]

    def run_code(self, code: str, language: str = "python", *, context_id: Optional[str] = None,
                 timeout_seconds: Optional[float] = None, on_stdout: StrCallback = None,
                 on_stderr: StrCallback = None, on_result: Optional[Callable[[Any], Any]] = None) -> Execution:
        """Runs code in the sandbox's live interpreter (code-interpreter
        template) and returns an :class:`Execution`: ``.text`` (the last
        expression's value), ``.results`` (``.text``, ``.png`` base64 for
        plots), ``.logs.stdout``/``.stderr`` and ``.error`` (name, value,
        traceback). Variables persist between calls in the same
        ``context_id``. An exception in the code is ``.error``, not raised; a
        run past ``timeout_seconds`` is interrupted (``.error.name`` is
        TimeoutError) and the interpreter stays usable."""
        body: Dict[str, Any] = {"code": code, "language": language}
        if context_id:
            body["context_id"] = context_id
        if timeout_seconds:
            body["timeout_seconds"] = timeout_seconds
        resp = self._client._t.request("POST", self._path("/code"), json_body=body,
                                       accept=NDJSON, timeout=None)
        try:
            ex = read_code_stream(resp.lines(), resp.request_id, on_stdout=on_stdout,
                                  on_stderr=on_stderr, on_result=on_result)
            try:
                resp.read()
            except errors.PandaStackError:
                pass
            return ex
        finally:
            resp.close()

    def code_contexts(self) -> List[Dict[str, Any]]:
        """The interpreter's contexts: [{"id": ..., "execution_count": N}]."""
        return list(self._call("GET", "/code/contexts").get("contexts") or [])


class BackgroundProcess:
    """A command started with ``exec(..., background=True)``."""

    def __init__(self, sandbox: Sandbox, pid: int):
        self.sandbox = sandbox
        self.pid = pid

    def __repr__(self) -> str:
        return f"BackgroundProcess(sandbox={self.sandbox.id!r}, pid={self.pid})"

    def attach(self, **kw: Any) -> ExecResult:
        """Follows its output until it exits (see Sandbox.attach)."""
        return self.sandbox.attach(self.pid, **kw)

    wait = attach

    def signal(self, signal: Union[str, int] = "TERM") -> None:
        self.sandbox.signal(self.pid, signal)

    def kill(self) -> None:
        """Sends SIGKILL."""
        self.sandbox.signal(self.pid, "KILL")


class Filesystem:
    """``sandbox.filesystem``: the sandbox's files. Paths are absolute."""

    def __init__(self, sandbox: Sandbox):
        self._s = sandbox

    def _t(self) -> Transport:
        return self._s._client._t

    def watch_dir(self, path: str, *, recursive: bool = False,
                  timeout_seconds: Optional[float] = None) -> "Iterator[Dict[str, Any]]":
        """Watches a directory: yields one dict per change (``type`` create,
        write, remove, rename (with ``from``), chmod or overflow; ``path``
        relative to the directory; ``is_dir``) as they happen, until
        ``timeout_seconds`` passes or the generator is closed. It returns
        once the watch is in place, so later changes are all seen."""
        q: Dict[str, Any] = {"path": path}
        if recursive:
            q["recursive"] = "true"
        if timeout_seconds:
            q["timeout_seconds"] = timeout_seconds
        resp = self._t().request("GET", self._s._path("/files/watch"), query=q,
                                 accept="application/x-ndjson", timeout=None)
        lines = resp.lines()
        first = json.loads(next(lines, b"{}"))
        if first.get("type") != "start":
            resp.close()
            raise errors.PandaStackError(f"watch {path}: the stream did not start", request_id=resp.request_id)

        def events() -> "Iterator[Dict[str, Any]]":
            try:
                for line in lines:
                    ev = json.loads(line)
                    if ev.get("type") == "error":
                        e = ev.get("error") or {}
                        raise errors.make_error(e.get("code"), e.get("message", ""), request_id=resp.request_id)
                    yield ev
            finally:
                resp.close()
        return events()

    def read_to(self, path: str, fileobj: Any) -> int:
        """Streams a file into a binary file object (anything with
        ``write(bytes)``); returns the number of bytes. A transfer cut short
        raises APIConnectionError."""
        n = 0
        for b in self.read_stream(path):
            fileobj.write(b)
            n += len(b)
        return n

    def read_bytes(self, path: str) -> bytes:
        """A file's contents. For large files prefer read_to."""
        buf = io.BytesIO()
        self.read_to(path, buf)
        return buf.getvalue()

    def read_stream(self, path: str) -> Iterator[bytes]:
        """A file's contents as an iterator of byte chunks, streamed as they
        arrive. A transfer cut short raises APIConnectionError."""
        resp = self._t().request("GET", self._s._path("/files"), query={"path": path},
                                 accept="application/octet-stream")
        try:
            n = 0
            while True:
                b = resp.read1(CHUNK)
                if not b:
                    break
                n += len(b)
                yield b
            length = resp.headers.get("Content-Length")
            if length is not None and length.isdigit() and int(length) != n:
                raise errors.APIConnectionError(f"read {path}: got {n} of {length} bytes",
                                                request_id=resp.request_id)
        finally:
            resp.close()

    def read(self, path: str, format: str = "text", encoding: str = "utf-8",
             errors: str = "strict") -> Any:
        """A file's contents, in E2B's formats: ``"text"`` (default) decodes
        them — bytes that are not valid text raise UnicodeDecodeError
        instead of coming back altered (pass ``errors="replace"`` to accept
        that) —, ``"bytes"`` returns them as they are, ``"stream"`` as an
        iterator of byte chunks (see read_stream)."""
        if format == "text":
            return self.read_bytes(path).decode(encoding, errors)
        if format == "bytes":
            return self.read_bytes(path)
        if format == "stream":
            return self.read_stream(path)
        raise ValueError(f'read: format must be "text", "bytes" or "stream", not {format!r}')

    def write(self, path: str, data: Union[str, bytes, bytearray, memoryview, Any],
              mode: Union[int, str, None] = None) -> FileInfo:
        """Creates or replaces a file. ``data`` is str (written as UTF-8),
        bytes, a binary file object (streamed with chunked encoding, never
        read whole into memory) or an iterable of bytes. ``mode`` is the
        permission bits (0o755 or "0755"; default 0644)."""
        q: Dict[str, str] = {"path": path}
        if mode is not None:
            q["mode"] = mode if isinstance(mode, str) else format(int(mode) & 0o7777, "04o")
        body: Any
        if isinstance(data, str):
            body = data.encode("utf-8")
        elif isinstance(data, (bytes, bytearray, memoryview)):
            body = bytes(data)
        elif hasattr(data, "read"):
            body = iter_file(data)
        elif data is None:
            body = b""
        else:
            body = (bytes(b) for b in data)
        d = self._t().call("PUT", self._s._path("/files"), query=q, body=body)
        return FileInfo.from_dict(d or {})

    def list(self, path: str) -> List[FileInfo]:
        """A directory's entries, by name."""
        out = self._t().call("GET", self._s._path("/files/list"), query={"path": path})
        return [FileInfo.from_dict(d) for d in out.get("entries") or []]

    def stat(self, path: str) -> FileInfo:
        """Describes a path."""
        return FileInfo.from_dict(self._t().call("GET", self._s._path("/files/stat"),
                                                 query={"path": path}))

    def exists(self, path: str) -> bool:
        """Whether a path exists."""
        try:
            self.stat(path)
            return True
        except errors.NotFoundError:
            return False

    def make_dir(self, path: str) -> None:
        """Creates a directory and any missing parents."""
        self._t().call("POST", self._s._path("/files/mkdir"), json_body={"path": path})

    def remove(self, path: str, recursive: bool = False) -> None:
        """Removes a file or an empty directory; with ``recursive``, a
        directory and everything in it."""
        self._t().call("DELETE", self._s._path("/files"),
                       query={"path": path, "recursive": "true" if recursive else "false"})

    def rename(self, src: str, dst: str) -> None:
        """Renames or moves a file or directory."""
        self._t().call("POST", self._s._path("/files/rename"), json_body={"from": src, "to": dst})


SPEC_ENTRY = ".pandastack-spec"


def pack_build_context(spec: Union[str, bytes], context_dir: Optional[str]) -> bytes:
    """A custom build's upload: a tar of ``context_dir`` with the spec as its
    ``.pandastack-spec`` entry. Symbolic links are sent as links (the server
    refuses a COPY that follows one out of the context)."""
    import tarfile
    data = spec.encode() if isinstance(spec, str) else bytes(spec)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        info = tarfile.TarInfo(SPEC_ENTRY)
        info.size, info.mode = len(data), 0o644
        tf.addfile(info, io.BytesIO(data))
        if context_dir:
            for entry in sorted(os.listdir(context_dir)):
                if entry != SPEC_ENTRY:
                    tf.add(os.path.join(context_dir, entry), arcname=entry, recursive=True)
    return buf.getvalue()
