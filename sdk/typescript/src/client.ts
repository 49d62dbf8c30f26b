// The client: configuration and the top-level API groups.

import { makeError } from "./errors.js";
import { HttpClient, NDJSON } from "./http.js";
import { describe, isAbort, readNDJSON } from "./ndjson.js";
import { Sandboxes } from "./sandbox.js";
import { Apps } from "./apps.js";
import { Databases } from "./databases.js";
import {
  toCreatedKey,
  toKey,
  toQuotas,
  quotaUpdateBody,
  type Key,
  type Quotas,
  type QuotaUpdate,
  type WireKey,
  type WireQuotas,
  toTemplate,
  toSnapshot,
  type ImportSnapshotOptions,
  type Snapshot,
  type WireSnapshot,
  toVolume,
  type Volume,
  type WireVolume,
  type ColdBoot,
  type CreateKeyParams,
  type CreatedKey,
  type Health,
  type RequestOptions,
  type Template,
  type TemplateVersion,
  type WireBuildEvent,
  type WireColdBoot,
  type WireCreatedKey,
  type WireTemplate,
} from "./types.js";
import { APIConnectionError } from "./errors.js";
import { packBuildContext } from "./buildcontext.js";

/** Used when neither `baseUrl` nor PANDASTACK_BASE_URL says otherwise. */
export const DEFAULT_BASE_URL = "http://localhost:8080";

/** Options of `new PandaStack(...)`. */
export interface ClientOptions {
  /** API key (pds_...). Default: env PANDASTACK_API_KEY, else PANDASTACK_TOKEN. */
  apiKey?: string | undefined;
  /** Server address. Default: env PANDASTACK_BASE_URL, else http://localhost:8080. */
  baseUrl?: string | undefined;
  /** A fetch implementation to use instead of the global one. */
  fetch?: ((input: string, init: RequestInit) => Promise<Response>) | undefined;
  /** Extra headers sent with every request. */
  headers?: Record<string, string> | undefined;
}

/** Reads an environment variable where the runtime has a `process.env` (Node, Bun, Deno's Node compat). */
function env(name: string): string | undefined {
  try {
    const p = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process;
    const v = p?.env?.[name];
    return v === "" ? undefined : v;
  } catch {
    return undefined;
  }
}

/** `client.templates`: the templates sandboxes are created from. */
export class Templates {
  readonly #http: HttpClient;
  /** @internal */
  constructor(http: HttpClient) {
    this.#http = http;
  }

  /** Lists the templates, by name. */
  async list(opts: RequestOptions = {}): Promise<Template[]> {
    const w = await this.#http.json<{ templates: WireTemplate[] }>({ method: "GET", path: "/v1/templates", signal: opts.signal });
    return (w.templates ?? []).map(toTemplate);
  }

  /** Builds (or rebuilds) a template, calling `onLog` with each log line as it is produced. Needs an admin key. */
  async build(name: string, opts: RequestOptions & { onLog?: (line: string) => void } = {}): Promise<Template> {
    const resp = await this.#http.send({
      method: "POST",
      path: `/v1/templates/${encodeURIComponent(name)}/build`,
      accept: NDJSON,
      signal: opts.signal,
    });
    const requestId = resp.headers.get("x-request-id") ?? undefined;
    if (resp.body) {
      for await (const ev of readNDJSON<WireBuildEvent>(resp.body, requestId)) {
        if (ev.type === "log") opts.onLog?.(ev.line);
        else if (ev.type === "done") return toTemplate(ev.template);
        else if (ev.type === "error")
          throw makeError({ status: 0, code: ev.error?.code || "internal", message: ev.error?.message || "unknown error", requestId });
      }
    }
    throw new APIConnectionError({ status: 0, code: "connection_error", message: `build stream of ${name} ended early`, requestId });
  }

  /**
   * Builds a custom template from a spec file (see the README for its
   * syntax) and its build context (relative path → content, what COPY
   * reads), calling `onLog` with each log line.
   *
   * Any key builds for its own team (the name is the team's; public names
   * are reserved: ConflictError). An admin key builds for the public
   * catalog, or for the team `team` names (NotFoundError if there is none).
   * A team key naming another team gets PermissionDeniedError; a team at
   * its `max_concurrent_builds` QuotaExceededError.
   */
  async buildCustom(
    name: string,
    opts: RequestOptions & {
      spec: string | Uint8Array;
      files?: Record<string, string | Uint8Array>;
      tag?: string;
      cpus?: number;
      memoryMib?: number;
      diskGib?: number;
      /** Admin keys: build for this team (by name) instead of the public catalog. */
      team?: string;
      onLog?: (line: string) => void;
    },
  ): Promise<Template> {
    const resp = await this.#http.send({
      method: "POST",
      path: `/v1/templates/${encodeURIComponent(name)}/build`,
      query: { tag: opts.tag, cpus: opts.cpus, memory_mib: opts.memoryMib, disk_gib: opts.diskGib, team: opts.team || undefined },
      body: packBuildContext(opts.spec, opts.files),
      contentType: "application/x-tar",
      accept: NDJSON,
      signal: opts.signal,
    });
    const requestId = resp.headers.get("x-request-id") ?? undefined;
    if (resp.body) {
      for await (const ev of readNDJSON<WireBuildEvent>(resp.body, requestId)) {
        if (ev.type === "log") opts.onLog?.(ev.line);
        else if (ev.type === "done") return toTemplate(ev.template);
        else if (ev.type === "error")
          throw makeError({ status: 0, code: ev.error?.code || "internal", message: ev.error?.message || "unknown error", requestId });
      }
    }
    throw new APIConnectionError({ status: 0, code: "connection_error", message: `build stream of ${name} ended early`, requestId });
  }

  /** Lists a template's versions, oldest first; create from one with template "NAME:VERSION" or "NAME:TAG". */
  async versions(name: string, opts: RequestOptions = {}): Promise<TemplateVersion[]> {
    const w = await this.#http.json<{ versions: TemplateVersion[] }>({
      method: "GET",
      path: `/v1/templates/${encodeURIComponent(name)}/versions`,
      signal: opts.signal,
    });
    return w.versions ?? [];
  }

  /** Boots a template from its disk image without its snapshot (admin; a benchmark baseline). */
  async coldBoot(name: string, opts: RequestOptions = {}): Promise<ColdBoot> {
    const w = await this.#http.json<WireColdBoot>({
      method: "POST",
      path: `/v1/templates/${encodeURIComponent(name)}/coldboot`,
      signal: opts.signal,
    });
    return { template: w.template, coldBootMs: w.cold_boot_ms, accel: w.accel };
  }
}

/**
 * `client.keys`: API keys. `create` needs an admin key; `list`, `revoke` and
 * `rotate` work on every team's keys with an admin key, on its own team's
 * with any other.
 */
export class Keys {
  readonly #http: HttpClient;
  /** @internal */
  constructor(http: HttpClient) {
    this.#http = http;
  }

  /** Creates an API key for a team (created if it does not exist). The secret is in the answer only. */
  async create(params: CreateKeyParams & RequestOptions): Promise<CreatedKey> {
    const body: { team: string; name?: string } = { team: params.team };
    if (params.name) body.name = params.name;
    const w = await this.#http.json<WireCreatedKey>({ method: "POST", path: "/v1/keys", json: body, signal: params.signal });
    return toCreatedKey(w);
  }

  /** Lists keys (never their secrets), revoked ones included, oldest first; `team` (id or name) narrows an admin's list. */
  async list(opts: { team?: string } & RequestOptions = {}): Promise<Key[]> {
    const w = await this.#http.json<{ keys: WireKey[] }>({
      method: "GET",
      path: "/v1/keys",
      query: opts.team ? { team: opts.team } : undefined,
      signal: opts.signal,
    });
    return (w.keys ?? []).map(toKey);
  }

  /** Revokes a key: it fails with AuthenticationError from its next request on. */
  async revoke(id: string, opts: RequestOptions = {}): Promise<void> {
    await this.#http.json<unknown>({ method: "DELETE", path: `/v1/keys/${encodeURIComponent(id)}`, signal: opts.signal });
  }

  /** Replaces a key with a new one of the same team, name and role, and revokes the old one. The new secret is in the answer only. */
  async rotate(id: string, opts: RequestOptions = {}): Promise<CreatedKey> {
    const w = await this.#http.json<WireCreatedKey>({ method: "POST", path: `/v1/keys/${encodeURIComponent(id)}/rotate`, signal: opts.signal });
    return toCreatedKey(w);
  }
}

/** `client.quotas`: a team's limits and usage. */
export class QuotasAPI {
  readonly #http: HttpClient;
  /** @internal */
  constructor(http: HttpClient) {
    this.#http = http;
  }

  /** A team's quotas (`team`: id or name; needs an admin key), or without `team` the key's own team's. */
  async get(opts: { team?: string } & RequestOptions = {}): Promise<Quotas> {
    const path = opts.team ? `/v1/teams/${encodeURIComponent(opts.team)}/quotas` : "/v1/quotas";
    return toQuotas(await this.#http.json<WireQuotas>({ method: "GET", path, signal: opts.signal }));
  }

  /** Changes a team's limits (admin keys only); null puts a limit back to the server's default. Returns the quotas after the change. */
  async set(team: string, update: QuotaUpdate, opts: RequestOptions = {}): Promise<Quotas> {
    const w = await this.#http.json<WireQuotas>({
      method: "PUT",
      path: `/v1/teams/${encodeURIComponent(team)}/quotas`,
      json: quotaUpdateBody(update),
      signal: opts.signal,
    });
    return toQuotas(w);
  }
}

/**
 * `client.snapshots`: snapshots in the server's object storage
 * (`--object-store`). Take a snapshot with `sandbox.snapshot()`; start a
 * sandbox from one with `sandboxes.create({ snapshot: id })`.
 */
export class Snapshots {
  readonly #http: HttpClient;
  /** @internal */
  constructor(http: HttpClient) {
    this.#http = http;
  }

  /**
   * Exports a snapshot (RAM, disk, device state, machine, with a manifest of
   * SHA-256 sums) to the server's object storage; resolves once the export
   * is whole, with `objectKey` and `exportedAt` set. An exported snapshot
   * answers at once. NotFoundError for a missing (or another team's)
   * snapshot; UnavailableError (503) when the store fails.
   */
  async export(id: string, opts: RequestOptions = {}): Promise<Snapshot> {
    const w = await this.#http.json<WireSnapshot>({
      method: "POST",
      path: `/v1/snapshots/${encodeURIComponent(id)}/export`,
      signal: opts.signal,
    });
    return toSnapshot(w);
  }

  /**
   * Makes a snapshot of the caller's team from the export at `objectKey`
   * (an `objectKey` from `export`, also another server's sharing the store),
   * every file's size and SHA-256 checked first. It keeps the exported id
   * unless this server has a snapshot with it, and the exported name unless
   * `name` is given (ConflictError when the name is taken). NotFoundError
   * when there is no such export (a team key finds only its own team's);
   * UnavailableError (503) when an object is missing, truncated or altered
   * (nothing is left behind).
   */
  async import(objectKey: string, opts: ImportSnapshotOptions = {}): Promise<Snapshot> {
    const body: { object_key: string; name?: string } = { object_key: objectKey };
    if (opts.name) body.name = opts.name;
    const w = await this.#http.json<WireSnapshot>({ method: "POST", path: "/v1/snapshots", json: body, signal: opts.signal });
    return toSnapshot(w);
  }
}

/** `client.volumes`: durable volumes, mounted in sandboxes at create (`volumes` of `sandboxes.create`). */
export class Volumes {
  readonly #http: HttpClient;
  /** @internal */
  constructor(http: HttpClient) {
    this.#http = http;
  }

  /**
   * Creates an empty volume of `sizeMib` (16 MiB to 1 TiB). A size beyond the host's free disk
   * throws InsufficientStorageError (507); a taken name ConflictError.
   */
  async create(params: { name: string; sizeMib: number } & RequestOptions): Promise<Volume> {
    const w = await this.#http.json<WireVolume>({
      method: "POST",
      path: "/v1/volumes",
      json: { name: params.name, size_mib: params.sizeMib },
      signal: params.signal,
    });
    return toVolume(w);
  }

  /** Lists the team's volumes, oldest first. */
  async list(opts: RequestOptions = {}): Promise<Volume[]> {
    const w = await this.#http.json<{ volumes: WireVolume[] }>({ method: "GET", path: "/v1/volumes", signal: opts.signal });
    return (w.volumes ?? []).map(toVolume);
  }

  /** Fetches a volume by id or name. */
  async get(idOrName: string, opts: RequestOptions = {}): Promise<Volume> {
    const w = await this.#http.json<WireVolume>({ method: "GET", path: `/v1/volumes/${encodeURIComponent(idOrName)}`, signal: opts.signal });
    return toVolume(w);
  }

  /** Deletes a volume and its data; ConflictError while a live sandbox holds it. */
  async delete(idOrName: string, opts: RequestOptions = {}): Promise<void> {
    await this.#http.json<unknown>({ method: "DELETE", path: `/v1/volumes/${encodeURIComponent(idOrName)}`, signal: opts.signal });
  }
}

/**
 * A PandaStack client. Safe to share; it holds no connections of its own
 * (requests go through the runtime's fetch).
 *
 * ```ts
 * const client = new PandaStack(); // PANDASTACK_API_KEY, PANDASTACK_BASE_URL
 * const sandbox = await client.sandboxes.create({ template: "base" });
 * ```
 */
export class PandaStack {
  readonly #http: HttpClient;
  /** The server address the client uses (no trailing slash). */
  readonly baseUrl: string;
  readonly sandboxes: Sandboxes;
  readonly templates: Templates;
  readonly keys: Keys;
  readonly volumes: Volumes;
  readonly databases: Databases;
  readonly apps: Apps;
  readonly quotas: QuotasAPI;
  readonly snapshots: Snapshots;

  constructor(options: ClientOptions = {}) {
    const apiKey = options.apiKey ?? env("PANDASTACK_API_KEY") ?? env("PANDASTACK_TOKEN");
    const baseUrl = options.baseUrl || env("PANDASTACK_BASE_URL") || DEFAULT_BASE_URL;
    this.#http = new HttpClient({ baseUrl, apiKey, fetch: options.fetch, headers: options.headers });
    this.baseUrl = this.#http.baseUrl;
    this.sandboxes = new Sandboxes(this, this.#http);
    this.templates = new Templates(this.#http);
    this.keys = new Keys(this.#http);
    this.volumes = new Volumes(this.#http);
    this.databases = new Databases(this.#http);
    this.apps = new Apps(this.#http, apiKey);
    this.quotas = new QuotasAPI(this.#http);
    this.snapshots = new Snapshots(this.#http);
  }

  /** Whether an API key is configured. */
  get hasApiKey(): boolean {
    return this.#http.hasApiKey;
  }

  /** Checks that the server is up and says what isolation it provides. Needs no API key. */
  async health(opts: RequestOptions = {}): Promise<Health> {
    return this.#http.json<Health>({ method: "GET", path: "/v1/health", signal: opts.signal });
  }

  /**
   * The PEM certificate of the server's own CA, which signs the
   * certificates of its TLS listener (`--tls-listen`); add it to a client's
   * trust store (Node: `new https.Agent({ ca })`, or NODE_EXTRA_CA_CERTS).
   * Needs no API key. NotFoundError when the server has no CA.
   */
  async caCertificate(opts: RequestOptions = {}): Promise<string> {
    const resp = await this.#http.send({ method: "GET", path: "/v1/ca.pem", accept: "application/x-pem-file", signal: opts.signal });
    try {
      return await resp.text();
    } catch (cause) {
      if (isAbort(cause)) throw cause;
      throw new APIConnectionError({
        status: 0,
        code: "connection_error",
        message: `GET /v1/ca.pem: ${describe(cause)}`,
        requestId: resp.headers.get("x-request-id") ?? undefined,
        cause,
      });
    }
  }
}
