// Sandboxes: creating, finding and operating on microVMs.

import { encodeBase64 } from "./base64.js";
import { PandaStack, type ClientOptions } from "./client.js";
import { Filesystem } from "./filesystem.js";
import { NDJSON, type HttpClient } from "./http.js";
import { readExecStream } from "./stream.js";
import { Terminal, type TerminalOptions } from "./terminal.js";
import { readCodeStream, type Execution, type RunCodeOptions } from "./code.js";
import {
  toProcessInfo,
  toSandboxInfo,
  toNetworkPolicy,
  fromNetworkPolicy,
  type Accel,
  type AttachOptions,
  type CreateSandboxParams,
  type ExecOptions,
  type ExecResult,
  type ListSandboxesParams,
  type ProcessInfo,
  type RequestOptions,
  type SandboxInfo,
  type SandboxState,
  type NetworkPolicy,
  type NetworkStatus,
  type PortUrl,
  type WireNetworkPolicy,
  type SnapshotInfo,
  type WireCreateSandboxRequest,
  type WireExecRequest,
  type WireProcess,
  type WireSandbox,
} from "./types.js";

export function sandboxPath(id: string): string {
  return "/v1/sandboxes/" + encodeURIComponent(id);
}

function execBody(cmd: string, o: ExecOptions): WireExecRequest {
  const b: WireExecRequest = {};
  if (o.args && o.args.length > 0) b.args = cmd !== "" ? [cmd, ...o.args] : [...o.args];
  else b.cmd = cmd;
  if (o.env && Object.keys(o.env).length > 0) b.env = o.env;
  if (o.cwd) b.cwd = o.cwd;
  if (o.user) b.user = o.user;
  if (o.timeoutSeconds) b.timeout_seconds = o.timeoutSeconds;
  if (typeof o.stdin === "string") b.stdin = o.stdin;
  else if (o.stdin !== undefined) b.stdin_base64 = encodeBase64(o.stdin);
  return b;
}

/** A command started with `exec(cmd, { background: true })`. */
export class CommandHandle {
  readonly sandbox: Sandbox;
  readonly pid: number;

  /** @internal */
  constructor(sandbox: Sandbox, pid: number) {
    this.sandbox = sandbox;
    this.pid = pid;
  }

  /** Follows the command's output (replayed from its start as far as kept) until it exits. */
  wait(opts: AttachOptions = {}): Promise<ExecResult> {
    return this.sandbox.attach(this.pid, opts);
  }

  /** Same as `wait`. */
  attach(opts: AttachOptions = {}): Promise<ExecResult> {
    return this.sandbox.attach(this.pid, opts);
  }

  /** Sends a signal ("TERM", "SIGKILL", 9, ...). */
  signal(signal: string | number, opts: RequestOptions = {}): Promise<void> {
    return this.sandbox.signal(this.pid, signal, opts);
  }

  /** Sends SIGKILL. */
  kill(opts: RequestOptions = {}): Promise<void> {
    return this.sandbox.signal(this.pid, "KILL", opts);
  }
}

/**
 * A microVM sandbox and a handle to operate on it. Its fields (`state`,
 * `expiresAt`, ...) are a snapshot from the server; `refresh()` updates them.
 */
export class Sandbox {
  readonly #http: HttpClient;
  #info: SandboxInfo;
  /** The client this sandbox was obtained from. */
  readonly client: PandaStack;
  /** The sandbox's file system. */
  readonly filesystem: Filesystem;

  /** @internal Use `Sandbox.create`, `client.sandboxes.create` or `client.sandboxes.get`. */
  constructor(client: PandaStack, http: HttpClient, info: SandboxInfo) {
    this.client = client;
    this.#http = http;
    this.#info = info;
    this.filesystem = new Filesystem(http, sandboxPath(info.id));
  }

  /** Creates a sandbox with a client configured from the environment (or `clientOptions`). */
  static create(params: CreateSandboxParams & RequestOptions, clientOptions?: ClientOptions): Promise<Sandbox> {
    return new PandaStack(clientOptions).sandboxes.create(params);
  }

  /** Fetches an existing sandbox (live or ended) with a client configured from the environment (or `clientOptions`). */
  static get(id: string, clientOptions?: ClientOptions & RequestOptions): Promise<Sandbox> {
    return new PandaStack(clientOptions).sandboxes.get(id, clientOptions);
  }

  /** Alias of `Sandbox.get`: a handle to an existing sandbox. */
  static connect(id: string, clientOptions?: ClientOptions & RequestOptions): Promise<Sandbox> {
    return Sandbox.get(id, clientOptions);
  }

  /** Alias of `filesystem`. */
  get files(): Filesystem {
    return this.filesystem;
  }
  get id(): string {
    return this.#info.id;
  }
  get teamId(): string {
    return this.#info.teamId;
  }
  get template(): string {
    return this.#info.template;
  }
  get templateId(): string {
    return this.#info.templateId;
  }
  get state(): SandboxState {
    return this.#info.state;
  }
  get host(): string {
    return this.#info.host;
  }
  /** "kvm" (hardware isolation) or "tcg" (software emulation: not a security boundary). */
  get accel(): Accel {
    return this.#info.accel;
  }
  get metadata(): Record<string, string> {
    return this.#info.metadata;
  }
  get env(): Record<string, string> {
    return this.#info.env;
  }
  get cpus(): number {
    return this.#info.cpus;
  }
  get memoryMib(): number {
    return this.#info.memoryMib;
  }
  get createdAt(): Date {
    return this.#info.createdAt;
  }
  get expiresAt(): Date {
    return this.#info.expiresAt;
  }
  get endedAt(): Date | undefined {
    return this.#info.endedAt;
  }
  get endReason(): string | undefined {
    return this.#info.endReason;
  }
  /** Whether the sandbox had not ended (starting, running or hibernated) when last fetched. */
  get isLive(): boolean {
    const s = this.#info.state;
    return s === "starting" || s === "running" || s === "hibernated";
  }
  /** All fields as a plain object. */
  get info(): SandboxInfo {
    return { ...this.#info };
  }
  toJSON(): SandboxInfo {
    return this.info;
  }

  #path(rest = ""): string {
    return sandboxPath(this.#info.id) + rest;
  }

  /**
   * Runs a command and waits for it to end. Output streams to `onStdout` /
   * `onStderr` as it is produced and is collected in the result. A non-zero
   * exit code or a timeout is not an error; the promise rejects only if the
   * command could not be run or followed. Aborting `signal` kills it.
   *
   * With `background: true` it starts the command and resolves at once with
   * a `CommandHandle` (its `pid`); follow it with `attach`, stop it with `signal`.
   */
  exec(cmd: string, opts: ExecOptions & { background: true }): Promise<CommandHandle>;
  exec(cmd: string, opts?: ExecOptions & { background?: false | undefined }): Promise<ExecResult>;
  exec(cmd: string, opts?: ExecOptions): Promise<ExecResult | CommandHandle>;
  async exec(cmd: string, opts: ExecOptions = {}): Promise<ExecResult | CommandHandle> {
    const body = execBody(cmd, opts);
    if (opts.background) {
      body.background = true;
      const out = await this.#http.json<{ pid: number }>({
        method: "POST",
        path: this.#path("/exec"),
        json: body,
        signal: opts.signal,
      });
      return new CommandHandle(this, out.pid);
    }
    const resp = await this.#http.send({
      method: "POST",
      path: this.#path("/exec"),
      json: body,
      accept: NDJSON,
      signal: opts.signal,
    });
    return readExecStream(resp, opts);
  }

  /**
   * Follows a process's output until it exits. Output produced before the
   * call is replayed as far as the guest kept it. Aborting `signal` detaches
   * without killing the process.
   */
  async attach(pid: number, opts: AttachOptions = {}): Promise<ExecResult> {
    const resp = await this.#http.send({
      method: "GET",
      path: this.#path(`/processes/${pid}/stream`),
      accept: NDJSON,
      signal: opts.signal,
    });
    return readExecStream(resp, opts);
  }

  /**
   * Runs code in the sandbox's live interpreter (code-interpreter template).
   * Variables persist between calls in the same context. An exception in
   * the code is `execution.error`, not a rejection.
   */
  async runCode(code: string, opts: RunCodeOptions = {}): Promise<Execution> {
    const body: Record<string, unknown> = { code, language: opts.language ?? "python" };
    if (opts.contextId) body.context_id = opts.contextId;
    if (opts.timeoutSeconds) body.timeout_seconds = opts.timeoutSeconds;
    const resp = await this.#http.send({
      method: "POST",
      path: this.#path("/code"),
      json: body,
      accept: NDJSON,
      signal: opts.signal,
    });
    return readCodeStream(resp, opts);
  }

  /** Sends a signal ("TERM", "SIGTERM", "15", 9, ...) to a process. */
  async signal(pid: number, signal: string | number, opts: RequestOptions = {}): Promise<void> {
    await this.#http.json({
      method: "POST",
      path: this.#path(`/processes/${pid}/signal`),
      json: { signal: String(signal) },
      signal: opts.signal,
    });
  }

  /** Lists the commands started in the sandbox, by pid. */
  async processes(opts: RequestOptions = {}): Promise<ProcessInfo[]> {
    const w = await this.#http.json<{ processes: WireProcess[] }>({
      method: "GET",
      path: this.#path("/processes"),
      signal: opts.signal,
    });
    return (w.processes ?? []).map(toProcessInfo);
  }

  /** The network policy (undefined when the server gives sandboxes no network). */
  get network(): NetworkPolicy | undefined {
    return this.#info.network;
  }
  /** Ports are served at `PORT-ID.domain` through the server. */
  get domain(): string {
    return this.#info.domain;
  }

  /**
   * Where `port` of the sandbox is served through the server: `PORT-ID.DOMAIN`.
   * Private unless listed in the policy's publicPorts: send the API key, or use `signPortUrl`.
   */
  getHost(port: number): string {
    return `${port}-${this.#info.id}.${this.#info.domain}`;
  }

  /** The network policy in force, with how many connections it denied. */
  async getNetwork(opts: RequestOptions = {}): Promise<NetworkStatus> {
    const w = await this.#http.json<WireNetworkPolicy>({ method: "GET", path: this.#path("/network"), signal: opts.signal });
    return { ...toNetworkPolicy(w), deniedConnections: w.denied_connections ?? 0 };
  }

  /** Replaces the network policy; new connections follow it at once. */
  async setNetwork(policy: NetworkPolicy, opts: RequestOptions = {}): Promise<NetworkStatus> {
    const w = await this.#http.json<WireNetworkPolicy>({
      method: "PUT",
      path: this.#path("/network"),
      json: fromNetworkPolicy(policy),
      signal: opts.signal,
    });
    this.#info = { ...this.#info, network: toNetworkPolicy(w) };
    return { ...toNetworkPolicy(w), deniedConnections: w.denied_connections ?? 0 };
  }

  /** A URL reaching `port` without an API key until it expires (default: an hour). */
  async signPortUrl(port: number, opts: RequestOptions & { expiresInSeconds?: number } = {}): Promise<PortUrl> {
    const w = await this.#http.json<{ url: string; host: string; token: string; expires_at: string }>({
      method: "POST",
      path: this.#path(`/ports/${port}/url`),
      json: opts.expiresInSeconds ? { expires_in_seconds: opts.expiresInSeconds } : {},
      signal: opts.signal,
    });
    return { url: w.url, host: w.host, token: w.token, expiresAt: new Date(w.expires_at) };
  }

  /** Measures one round trip to the sandbox's guest agent (measured on the server). */
  async ping(opts: RequestOptions = {}): Promise<{ rttMs: number }> {
    const w = await this.#http.json<{ rtt_ms: number }>({ method: "POST", path: this.#path("/ping"), signal: opts.signal });
    return { rttMs: w.rtt_ms };
  }

  /** Reloads the sandbox's fields from the server. */
  /**
   * Opens an interactive terminal (the login shell, or `opts.cmd`) over a
   * WebSocket; see `Terminal`.
   */
  async openTerminal(opts: TerminalOptions = {}): Promise<Terminal> {
    const q = new URLSearchParams();
    for (const k of ["cmd", "user", "cwd"] as const) if (opts[k]) q.set(k, opts[k]!);
    if (opts.rows) q.set("rows", String(opts.rows));
    if (opts.cols) q.set("cols", String(opts.cols));
    for (const [k, v] of Object.entries(opts.envs ?? {})) q.append("env", `${k}=${v}`);
    const t = new Terminal(this.#http, sandboxPath(this.id) + "/pty", opts.onData);
    await t.dial(q);
    return t;
  }

  /** Connects to a terminal session again; `offset` is the output bytes already received. */
  async reattachTerminal(sessionId: string, opts: { offset?: number; onData?: (data: Uint8Array) => void } = {}): Promise<Terminal> {
    const t = new Terminal(this.#http, sandboxPath(this.id) + "/pty", opts.onData);
    t.offset = opts.offset ?? 0;
    await t.dial(new URLSearchParams({ session: sessionId, offset: String(t.offset) }));
    return t;
  }

  async refresh(opts: RequestOptions = {}): Promise<this> {
    const w = await this.#http.json<WireSandbox>({ method: "GET", path: this.#path(), signal: opts.signal });
    this.#info = toSandboxInfo(w);
    return this;
  }

  /** Makes the sandbox expire `seconds` from now, and updates `expiresAt`. */
  async setTtl(seconds: number, opts: RequestOptions = {}): Promise<this> {
    const w = await this.#http.json<WireSandbox>({
      method: "PUT",
      path: this.#path("/ttl"),
      json: { ttl_seconds: seconds },
      signal: opts.signal,
    });
    this.#info = toSandboxInfo(w);
    return this;
  }

  /** Ends the sandbox. Killing a sandbox that has already ended is not an error. */
  async kill(opts: RequestOptions = {}): Promise<void> {
    await this.#http.json({ method: "DELETE", path: this.#path(), signal: opts.signal });
    if (this.isLive) this.#info = { ...this.#info, state: "killed" };
  }

  /**
   * Forks the sandbox into a new one (POST /v1/sandboxes/{id}/fork).
   * Needs a server that serves this route; older servers answer
   * NotFoundError / MethodNotAllowedError.
   */
  async fork(opts: RequestOptions = {}): Promise<Sandbox> {
    const w = await this.#http.json<WireSandbox>({ method: "POST", path: this.#path("/fork"), signal: opts.signal });
    return new Sandbox(this.client, this.#http, toSandboxInfo(w));
  }

  /**
   * Snapshots the sandbox (POST /v1/sandboxes/{id}/snapshot). Needs a
   * server that serves this route; older servers answer NotFoundError /
   * MethodNotAllowedError.
   */
  async snapshot(opts: RequestOptions = {}): Promise<SnapshotInfo> {
    return (await this.#http.json<SnapshotInfo>({ method: "POST", path: this.#path("/snapshot"), signal: opts.signal })) ?? { id: "" };
  }

  /**
   * Hibernates the sandbox (POST /v1/sandboxes/{id}/hibernate): its whole
   * state is saved and its memory and CPU freed; any use wakes it. Servers
   * older than this route answer NotFoundError / MethodNotAllowedError.
   */
  async hibernate(opts: RequestOptions = {}): Promise<this> {
    return this.#lifecycle("/hibernate", opts);
  }

  /**
   * Wakes a hibernated sandbox (POST /v1/sandboxes/{id}/wake). Servers older
   * than this route answer NotFoundError / MethodNotAllowedError.
   */
  async wake(opts: RequestOptions = {}): Promise<this> {
    return this.#lifecycle("/wake", opts);
  }

  async #lifecycle(rest: string, opts: RequestOptions): Promise<this> {
    const w = await this.#http.json<WireSandbox | undefined>({ method: "POST", path: this.#path(rest), signal: opts.signal });
    if (w && typeof w === "object" && typeof w.id === "string" && typeof w.state === "string") this.#info = toSandboxInfo(w);
    else await this.refresh(opts);
    return this;
  }
}

/** `client.sandboxes`: creating, fetching and listing sandboxes. */
export class Sandboxes {
  readonly #client: PandaStack;
  readonly #http: HttpClient;

  /** @internal */
  constructor(client: PandaStack, http: HttpClient) {
    this.#client = client;
    this.#http = http;
  }

  /** Starts a sandbox from a template, or from a snapshot; resolves when it is running. */
  async create(params: CreateSandboxParams & RequestOptions): Promise<Sandbox> {
    const body: WireCreateSandboxRequest = {};
    if (params.template) body.template = params.template;
    if (params.snapshot) body.snapshot = params.snapshot;
    if (params.ttlSeconds !== undefined) body.ttl_seconds = params.ttlSeconds;
    if (params.metadata && Object.keys(params.metadata).length > 0) body.metadata = params.metadata;
    if (params.env && Object.keys(params.env).length > 0) body.env = params.env;
    if (params.cpus) body.cpus = params.cpus;
    if (params.memoryMib) body.memory_mib = params.memoryMib;
    if (params.diskGib) body.disk_gib = params.diskGib;
    if (params.network) body.network = fromNetworkPolicy(params.network);
    if (params.volumes && params.volumes.length > 0) body.volumes = params.volumes.map((m) => ({ volume: m.volume, path: m.path }));
    if (params.autoHibernateSeconds !== undefined) body.auto_hibernate_seconds = params.autoHibernateSeconds;
    if (params.lifetime) body.lifetime = params.lifetime;
    if (params.onExpiry) body.on_expiry = params.onExpiry;
    const w = await this.#http.json<WireSandbox>({ method: "POST", path: "/v1/sandboxes", json: body, signal: params.signal });
    return new Sandbox(this.#client, this.#http, toSandboxInfo(w));
  }

  /** Fetches a sandbox, live or ended. */
  async get(id: string, opts: RequestOptions = {}): Promise<Sandbox> {
    const w = await this.#http.json<WireSandbox>({ method: "GET", path: sandboxPath(id), signal: opts.signal });
    return new Sandbox(this.#client, this.#http, toSandboxInfo(w));
  }

  /** Lists the team's sandboxes (live ones unless `state: "all"`), oldest first. */
  async list(params: ListSandboxesParams & RequestOptions = {}): Promise<Sandbox[]> {
    const q = new URLSearchParams();
    if (params.state && params.state !== "live") q.set("state", params.state);
    for (const [k, v] of Object.entries(params.metadata ?? {})) q.set("metadata." + k, v);
    const w = await this.#http.json<{ sandboxes: WireSandbox[] }>({
      method: "GET",
      path: "/v1/sandboxes",
      query: q,
      signal: params.signal,
    });
    return (w.sandboxes ?? []).map((s) => new Sandbox(this.#client, this.#http, toSandboxInfo(s)));
  }

  /**
   * Lists the team's service machines (created with `lifetime: "service"`),
   * live ones unless `state: "all"` (one whose VM did not survive a restart
   * is "failed", with its `endReason`), oldest first.
   */
  async machines(params: { state?: "live" | "all" } & RequestOptions = {}): Promise<Sandbox[]> {
    const q = new URLSearchParams();
    if (params.state === "all") q.set("state", "all");
    const w = await this.#http.json<{ machines: WireSandbox[] }>({
      method: "GET",
      path: "/v1/machines",
      query: q,
      signal: params.signal,
    });
    return (w.machines ?? []).map((s) => new Sandbox(this.#client, this.#http, toSandboxInfo(s)));
  }

  /** Kills a sandbox by id (no error if it has already ended). */
  async kill(id: string, opts: RequestOptions = {}): Promise<void> {
    await this.#http.json({ method: "DELETE", path: sandboxPath(id), signal: opts.signal });
  }
}
