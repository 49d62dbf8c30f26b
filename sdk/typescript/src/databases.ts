import type { HttpClient } from "./http.js";
import type { RequestOptions } from "./types.js";

/** A managed PostgreSQL 17 database: its own machine, reached through the server's database router. */
export interface Database {
  id: string;
  name: string;
  /** "creating", "running", "hibernated" or "stopped". */
  state: string;
  /** `<id>.<db domain>`: the TLS SNI name that routes to this database. */
  host: string;
  port: number;
  user: string;
  database: string;
  machineId: string;
  createdAt: Date;
  /** Scale to zero: hibernates after that many seconds without a client connection (0: never). */
  autoHibernateSeconds: number;
  /** Create and get only. */
  password?: string;
  /** `postgres://USER:PASSWORD@HOST:PORT/DB?sslmode=require` (create and get only). */
  connectionUri?: string;
  /** The same through PgBouncer in the machine, transaction pooling (create and get only). */
  pooledConnectionUri?: string;
  /** SQL over HTTP (Neon's `/sql` wire): `neonConfig.fetchEndpoint` of `@neondatabase/serverless`. */
  httpUrl?: string;
}

/** @internal */
export interface WireDatabase {
  id: string;
  name: string;
  state: string;
  host: string;
  port: number;
  user: string;
  database: string;
  machine_id: string;
  created_at: string;
  auto_hibernate_seconds?: number;
  password?: string;
  connection_uri?: string;
  pooled_connection_uri?: string;
  http_url?: string;
}

/** @internal */
export function toDatabase(w: WireDatabase): Database {
  return {
    id: w.id,
    name: w.name,
    state: w.state,
    host: w.host,
    port: w.port,
    user: w.user,
    database: w.database,
    machineId: w.machine_id,
    createdAt: new Date(w.created_at),
    autoHibernateSeconds: w.auto_hibernate_seconds ?? 0,
    password: w.password,
    connectionUri: w.connection_uri,
    pooledConnectionUri: w.pooled_connection_uri,
    httpUrl: w.http_url,
  };
}

/** `client.databases`: managed PostgreSQL databases. */
export class Databases {
  readonly #http: HttpClient;
  /** @internal */
  constructor(http: HttpClient) {
    this.#http = http;
  }

  /**
   * Creates a database; resolves once a query through the server's database router answered.
   * A taken name throws ConflictError. `autoHibernateSeconds` is scale to zero; `sizeMib` is its
   * volume (default 1024).
   */
  async create(params: { name: string; autoHibernateSeconds?: number; sizeMib?: number } & RequestOptions): Promise<Database> {
    const body: { name: string; auto_hibernate_seconds?: number; size_mib?: number } = { name: params.name };
    if (params.autoHibernateSeconds !== undefined) body.auto_hibernate_seconds = params.autoHibernateSeconds;
    if (params.sizeMib !== undefined) body.size_mib = params.sizeMib;
    const w = await this.#http.json<WireDatabase>({ method: "POST", path: "/v1/databases", json: body, signal: params.signal });
    return toDatabase(w);
  }

  /** Lists the team's databases, oldest first, without credentials. */
  async list(opts: RequestOptions = {}): Promise<Database[]> {
    const w = await this.#http.json<{ databases: WireDatabase[] }>({ method: "GET", path: "/v1/databases", signal: opts.signal });
    return (w.databases ?? []).map(toDatabase);
  }

  /** Fetches a database (id or name) with its credentials. */
  async get(idOrName: string, opts: RequestOptions = {}): Promise<Database> {
    return toDatabase(await this.#http.json<WireDatabase>({ method: "GET", path: dbPath(idOrName), signal: opts.signal }));
  }

  /** Deletes a database: its machine, its data and its route. */
  async delete(idOrName: string, opts: RequestOptions = {}): Promise<void> {
    await this.#http.json<unknown>({ method: "DELETE", path: dbPath(idOrName), signal: opts.signal });
  }

  /** Saves the database's machine to disk; the next connection (or wake) brings it back. */
  async hibernate(idOrName: string, opts: RequestOptions = {}): Promise<Database> {
    return toDatabase(await this.#http.json<WireDatabase>({ method: "POST", path: dbPath(idOrName) + "/hibernate", signal: opts.signal }));
  }

  /** Brings a hibernated database back. */
  async wake(idOrName: string, opts: RequestOptions = {}): Promise<Database> {
    return toDatabase(await this.#http.json<WireDatabase>({ method: "POST", path: dbPath(idOrName) + "/wake", signal: opts.signal }));
  }

  /**
   * Copies a running database into a new one named `name` (memory and data copy-on-write; the
   * parent keeps serving). The fork has its own password; resolves like create.
   */
  async fork(idOrName: string, name: string, opts: RequestOptions = {}): Promise<Database> {
    return toDatabase(
      await this.#http.json<WireDatabase>({ method: "POST", path: dbPath(idOrName) + "/fork", json: { name }, signal: opts.signal }),
    );
  }

  /** The database's base backups (oldest first), its WAL archive's position and earliest restore time (wire JSON). */
  async backups(idOrName: string, opts: RequestOptions = {}): Promise<DatabaseBackupList> {
    return this.#http.json<DatabaseBackupList>({ method: "GET", path: dbPath(idOrName) + "/backups", signal: opts.signal });
  }

  /** Takes a base backup of a running database now; resolves once it is in object storage. */
  async backup(idOrName: string, opts: RequestOptions = {}): Promise<DatabaseBackup> {
    return this.#http.json<DatabaseBackup>({ method: "POST", path: dbPath(idOrName) + "/backups", signal: opts.signal });
  }

  /**
   * Makes database `name` from the database's backups as it was at `targetTime`; resolves like
   * create. `sizeMib` gives it a bigger volume than the source's (never a smaller one): a database
   * whose volume filled is restored into a bigger one.
   */
  async restore(
    idOrName: string,
    name: string,
    targetTime: Date | string,
    opts: { sizeMib?: number } & RequestOptions = {},
  ): Promise<Database> {
    const target_time = targetTime instanceof Date ? targetTime.toISOString() : targetTime;
    const body: { name: string; target_time: string; size_mib?: number } = { name, target_time };
    if (opts.sizeMib !== undefined) body.size_mib = opts.sizeMib;
    return toDatabase(
      await this.#http.json<WireDatabase>({ method: "POST", path: dbPath(idOrName) + "/restore", json: body, signal: opts.signal }),
    );
  }
}

/** A base backup of a database, as the server sends it. */
export interface DatabaseBackup {
  id: string;
  database_id: string;
  state: "running" | "done" | "failed";
  started_at: string;
  finished_at?: string;
  start_lsn?: string;
  end_lsn?: string;
  size_bytes: number;
  verified: boolean;
  error?: string;
}

/** A database's backups and WAL archive, as the server sends them. */
export interface DatabaseBackupList {
  backups: DatabaseBackup[];
  wal: { last_segment?: string; archived_through_lsn?: string; archived_at?: string };
  earliest_restore_time?: string;
  /** Stretches no restore reaches: gaps in the WAL archive (it stopped while the volume was full). `until` is absent while no base backup has ended since. */
  restore_gaps?: { from: string; until?: string }[];
}

function dbPath(idOrName: string): string {
  return `/v1/databases/${encodeURIComponent(idOrName)}`;
}
