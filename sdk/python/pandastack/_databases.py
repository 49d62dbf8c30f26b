"""``client.databases``: managed PostgreSQL databases."""

from __future__ import annotations

from typing import Any, Dict, List, Optional
from urllib.parse import quote


class Databases:
    """``client.databases``: managed PostgreSQL 17 databases, each its own
    machine. A database is a dict with ``id``, ``name``, ``state``
    (running, hibernated, stopped), ``host``, ``port``, ``user``,
    ``database``, ``created_at``; create and get add ``password``,
    ``connection_uri``, ``pooled_connection_uri`` (PgBouncer) and
    ``http_url`` (SQL over HTTP, Neon's wire)."""

    def __init__(self, client: Any):
        self._c = client

    def create(self, name: str, *, auto_hibernate_seconds: Optional[int] = None,
               size_mib: Optional[int] = None) -> Dict[str, Any]:
        """Makes a database; returns once a query through the server's
        database router answered. ConflictError for a taken name.
        ``auto_hibernate_seconds`` is scale to zero: with no client
        connection for that long it hibernates; the next one wakes it.
        ``size_mib`` is its volume (default 1024)."""
        body: Dict[str, Any] = {"name": name}
        if auto_hibernate_seconds is not None:
            body["auto_hibernate_seconds"] = auto_hibernate_seconds
        if size_mib is not None:
            body["size_mib"] = size_mib
        return self._c._t.call("POST", "/v1/databases", json_body=body)

    def list(self) -> List[Dict[str, Any]]:
        """The team's databases, oldest first, without credentials."""
        return list(self._c._t.call("GET", "/v1/databases").get("databases") or [])

    def get(self, id_or_name: str) -> Dict[str, Any]:
        return self._c._t.call("GET", _path(id_or_name))

    def delete(self, id_or_name: str) -> None:
        """Deletes a database: its machine, its data and its route."""
        self._c._t.call("DELETE", _path(id_or_name))

    def hibernate(self, id_or_name: str) -> Dict[str, Any]:
        """Saves the database's machine to disk; the next connection (or
        wake) brings it back."""
        return self._c._t.call("POST", _path(id_or_name) + "/hibernate")

    def wake(self, id_or_name: str) -> Dict[str, Any]:
        return self._c._t.call("POST", _path(id_or_name) + "/wake")

    def fork(self, id_or_name: str, name: str) -> Dict[str, Any]:
        """Copies a running database into a new one named ``name``
        (memory and data copy-on-write; the parent keeps serving). The
        fork has its own password; returns like create."""
        return self._c._t.call("POST", _path(id_or_name) + "/fork", json_body={"name": name})

    def backups(self, id_or_name: str) -> Dict[str, Any]:
        """The database's base backups (oldest first), where its WAL
        archive stands (``wal``), ``earliest_restore_time``, and
        ``restore_gaps``: stretches no restore reaches (``from``, and
        ``until`` once a base backup ended after the gap)."""
        return self._c._t.call("GET", _path(id_or_name) + "/backups")

    def backup(self, id_or_name: str) -> Dict[str, Any]:
        """Takes a base backup of a running database now; returns it once
        it is in object storage."""
        return self._c._t.call("POST", _path(id_or_name) + "/backups")

    def restore(self, id_or_name: str, name: str, target_time: str, *,
                size_mib: Optional[int] = None) -> Dict[str, Any]:
        """Makes database ``name`` from the database's backups as it was at
        ``target_time`` (RFC 3339); returns like create, with its own
        password. ``size_mib`` gives it a bigger volume than the source's
        (never a smaller one): a database whose volume filled is restored
        into a bigger one."""
        body: Dict[str, Any] = {"name": name, "target_time": target_time}
        if size_mib is not None:
            body["size_mib"] = size_mib
        return self._c._t.call("POST", _path(id_or_name) + "/restore", json_body=body)


def _path(id_or_name: str) -> str:
    return "/v1/databases/" + quote(id_or_name, safe="")
