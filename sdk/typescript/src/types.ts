// Public data types (camelCase, dates as Date) and the JSON wire shapes of
// api/openapi.yaml (snake_case) they are converted from.

/** "kvm": hardware isolation. "tcg": software emulation, not a security boundary. */
export type Accel = "kvm" | "tcg";

/** A sandbox's lifecycle state. "starting", "running" and "hibernated" are live; the rest have ended. */
export type SandboxState = "starting" | "running" | "hibernated" | "killed" | "expired" | "failed";

/** The server's answer to a health check. */
export interface Health {
  status: "ok";
  version: string;
  accel: Accel;
  /** What the accelerator means for untrusted code, in plain words. */
  isolation: string;
}

/** A sandbox as the server last described it. */
export interface SandboxInfo {
  id: string;
  teamId: string;
  template: string;
  /** The exact template build. */
  templateId: string;
  state: SandboxState;
  host: string;
  accel: Accel;
  metadata: Record<string, string>;
  env: Record<string, string>;
  cpus: number;
  memoryMib: number;
  createdAt: Date;
  expiresAt: Date;
  endedAt?: Date | undefined;
  endReason?: string | undefined;
  /** The network policy (undefined when the server gives sandboxes no network). */
  network?: NetworkPolicy | undefined;
  /** Ports are served at `PORT-ID.domain` through the server (see `getHost`). */
  domain: string;
  /** The durable volumes attached to it (`volume` is the id). */
  volumes: VolumeMount[];
  /** Seconds without activity before it is hibernated (0: never). */
  autoHibernateSeconds: number;
  /** "sandbox", or "service": a service machine, with no TTL (its `expiresAt` is an invalid Date). */
  lifetime: Lifetime;
  /**
   * The platform service that owns the machine ("database:ID", "app:NAME",
   * "function:NAME"); such a machine changes only through its service.
   */
  managedBy?: string;
  /** What its deadline does: "kill" (the default) or "hibernate" (it sleeps until woken). */
  onExpiry: "kill" | "hibernate";
}

/**
 * A machine's lifetime class: "sandbox" ends when its TTL runs out;
 * "service" (a service machine) has no TTL, is never reaped, is
 * re-attached after server restarts, and is listed by
 * `client.sandboxes.machines()` and capped per team.
 */
export type Lifetime = "sandbox" | "service";

/**
 * What a sandbox may reach, and which of its ports anyone may reach without
 * a key. Egress is decided in order: denyCidrs reject, allowCidrs accept,
 * addresses DNS answered for allowDomains accept, then `egress` ("allow",
 * the default, or "deny"). "example.com" matches that name only;
 * "*.example.com" every name below it but not the apex; any other "*" is
 * rejected (400). allowDomains implies egress "deny".
 */
export interface NetworkPolicy {
  egress?: "allow" | "deny";
  allowCidrs?: string[];
  denyCidrs?: string[];
  allowDomains?: string[];
  publicPorts?: number[];
}

/** The policy in force and how many connections it denied. */
export interface NetworkStatus extends NetworkPolicy {
  deniedConnections: number;
}

/** A signed URL reaching one port without an API key until it expires. */
export interface PortUrl {
  url: string;
  host: string;
  token: string;
  expiresAt: Date;
}

/** Describes a new sandbox. */
export interface CreateSandboxParams {
  /** Template name, e.g. "base"; required unless `snapshot` is given. */
  template?: string;
  /** Start from this snapshot id (of the caller's team) instead of the template's bake. */
  snapshot?: string;
  /** Seconds until the sandbox expires (server default 300). `setTtl` changes it later. */
  ttlSeconds?: number;
  /** Labels (at most 64), usable as `list` filters. */
  metadata?: Record<string, string>;
  /** Environment variables for every command. */
  env?: Record<string, string>;
  /** Another vCPU count than the template's (that size is baked once, on first use). */
  cpus?: number;
  /** Another memory size (MiB) than the template's. */
  memoryMib?: number;
  /** A bigger root disk (GiB) than the template's. */
  diskGib?: number;
  /** Egress policy and public ports (default: allow all, no public ports). */
  network?: NetworkPolicy;
  /**
   * Hibernate after this many seconds without an exec, file, port or
   * run_code request (default 0: never); any later use wakes it.
   */
  autoHibernateSeconds?: number;
  /** Durable volumes to mount (at most 2), e.g. `[{ volume: "data", path: "/data" }]`. */
  volumes?: VolumeMount[];
  /** "service" makes a service machine (leave `ttlSeconds` out); default "sandbox". */
  lifetime?: Lifetime;
  /**
   * What the TTL's end does: "kill" (default) ends it; "hibernate" hibernates
   * it (E2B's autoPause) until it is woken — it then gets its TTL again — or killed.
   */
  onExpiry?: "kill" | "hibernate";
}

/** Mounts a durable volume (by name or id) at `path` in a new sandbox. */
export interface VolumeMount {
  volume: string;
  path: string;
}

/** A durable volume: its data outlives the sandboxes it is mounted in. */
export interface Volume {
  id: string;
  teamId: string;
  name: string;
  sizeMib: number;
  createdAt: Date;
  /** The live sandbox it is attached to; "" when free. */
  sandboxId: string;
  mountPath: string;
  host: string;
}

/** @internal */
export interface WireVolume {
  id: string;
  team_id: string;
  name: string;
  size_mib: number;
  created_at: string;
  sandbox_id: string;
  mount_path?: string;
  host: string;
}

/** @internal */
export function toVolume(w: WireVolume): Volume {
  return {
    id: w.id,
    teamId: w.team_id,
    name: w.name,
    sizeMib: w.size_mib,
    createdAt: new Date(w.created_at),
    sandboxId: w.sandbox_id ?? "",
    mountPath: w.mount_path ?? "",
    host: w.host,
  };
}

/** Filters for listing sandboxes. */
export interface ListSandboxesParams {
  /** Only sandboxes whose metadata has all these key/value pairs. */
  metadata?: Record<string, string>;
  /** "live" (default) or "all" (also ended sandboxes). */
  state?: "live" | "all";
}

/** Per-call options accepted by every method. */
export interface RequestOptions {
  /** Aborts the call. For a running command, aborting the stream kills the command. */
  signal?: AbortSignal;
}

/** Output callback: the text (decoded as UTF-8, split characters carried over) and the raw bytes. */
export type OutputCallback = (text: string, bytes: Uint8Array) => void;

/** Options for `Sandbox.exec`. */
export interface ExecOptions extends RequestOptions {
  /**
   * Runs a program without a shell: the argv is the command followed by
   * `args` (or just `args` when the command is ""). Without `args` the
   * command runs with `bash -c` (`/bin/sh -c` in an image without bash).
   */
  args?: string[];
  env?: Record<string, string>;
  /** Absolute working directory. */
  cwd?: string;
  /** Default: the template's user. */
  user?: string;
  /** 0 or absent: no timeout. A timeout is not an error: see `ExecResult.timedOut`. */
  timeoutSeconds?: number;
  /** Standard input (at most about 700 KiB). */
  stdin?: string | Uint8Array;
  /** Receives standard output as it is produced. */
  onStdout?: OutputCallback;
  /** Receives standard error as it is produced. */
  onStderr?: OutputCallback;
  /** Leave `stdout`/`stderr` of the result empty (the callbacks still fire): for output too large to keep. */
  discardOutput?: boolean;
  /** Start the command and return at once with a `CommandHandle` (its pid); output callbacks are not used. */
  background?: boolean;
}

/** Options for `Sandbox.attach`. */
export interface AttachOptions extends RequestOptions {
  onStdout?: OutputCallback;
  onStderr?: OutputCallback;
  discardOutput?: boolean;
}

/** How a command ended and what it printed. */
export interface ExecResult {
  pid: number;
  /** Standard output decoded as UTF-8. */
  stdout: string;
  stderr: string;
  /** Standard output, exactly. */
  stdoutBytes: Uint8Array;
  stderrBytes: Uint8Array;
  exitCode: number;
  /** The signal that ended the command (e.g. "SIGKILL"), or "". */
  signal: string;
  /** Killed by `timeoutSeconds` (exitCode is then 137). */
  timedOut: boolean;
  durationMs: number;
}

/** A command started in a sandbox. */
export interface ProcessInfo {
  pid: number;
  cmd: string;
  args: string[];
  background: boolean;
  running: boolean;
  /** Once it has exited. */
  exitCode?: number | undefined;
  startedAt: Date;
}

/** Describes a path inside a sandbox. */
export interface FileInfo {
  name: string;
  path: string;
  size: number;
  /** Permission bits, e.g. 0o644 (420). */
  mode: number;
  isDir: boolean;
  modTime: Date;
  symlinkTarget?: string | undefined;
}

/** What `Filesystem.write` accepts. */
export type WriteData = string | Uint8Array | ArrayBuffer | Blob | ReadableStream<Uint8Array>;

/** Options for `Filesystem.write`. */
export interface WriteOptions extends RequestOptions {
  /** Permission bits: a number (0o755) or an octal string ("0755"). Default 0644. */
  mode?: number | string;
}

/** Options for `Filesystem.remove`. */
export interface RemoveOptions extends RequestOptions {
  /** Remove a non-empty directory and everything in it. */
  recursive?: boolean;
}

/** A template sandboxes are created from. */
export interface Template {
  /** The team that owns it; absent for the public catalog. */
  teamId?: string;
  name: string;
  /** Content key of the build inputs. */
  id: string;
  cpus: number;
  memoryMib: number;
  diskMib: number;
  accel: Accel;
  builtAt: Date;
  buildMs: number;
}

/** One build of a template (wire names, as the server sends them). */
export interface TemplateVersion {
  name: string;
  version: number;
  id: string;
  tags: string[];
  cpus: number;
  memory_mib: number;
  disk_mib: number;
  build_id?: string;
  built_at: string;
}

/** A new API key. `key` is the secret, shown only once. */
export interface CreatedKey {
  id: string;
  key: string;
  team: string;
  teamId: string;
  name: string;
  prefix: string;
  admin: boolean;
}

/** An API key as listed: never its secret. */
export interface Key {
  id: string;
  team: string;
  teamId: string;
  name: string;
  /** The secret's first 12 characters. */
  prefix: string;
  admin: boolean;
  createdAt: Date;
  /** Set once the key is revoked. */
  revokedAt?: Date | undefined;
}

/** What a team holds now. */
export interface QuotaUsage {
  sandboxes: number;
  serviceMachines: number;
  snapshots: number;
  volumes: number;
  builds: number;
  vcpus: number;
  memoryMib: number;
  /** Disk held on the host (maxDiskGib): root disks, hibernated memory, volumes, snapshots. */
  diskMib: number;
}

/** A team's limits (0: no limit), which were set for the team, and its usage. */
export interface Quotas {
  team: string;
  teamId: string;
  maxSandboxes: number;
  maxServiceMachines: number;
  maxSnapshots: number;
  maxVolumes: number;
  maxConcurrentBuilds: number;
  maxVcpus: number;
  maxMemoryMib: number;
  maxDiskGib: number;
  requestsPerSecond: number;
  burst: number;
  /** Wire names of the limits set for this team (e.g. "max_sandboxes"); the others are the server's defaults. */
  overridden: string[];
  usage: QuotaUsage;
}

/** Limits to change: a number sets one (0: no limit), null puts it back to the server's default. */
export interface QuotaUpdate {
  maxSandboxes?: number | null;
  maxServiceMachines?: number | null;
  maxSnapshots?: number | null;
  maxVolumes?: number | null;
  maxConcurrentBuilds?: number | null;
  maxVcpus?: number | null;
  maxMemoryMib?: number | null;
  maxDiskGib?: number | null;
  requestsPerSecond?: number | null;
  burst?: number | null;
}

/** Parameters of `keys.create`. */
export interface CreateKeyParams {
  /** Team name; created if absent. */
  team: string;
  /** A label for the key (default "default"). */
  name?: string;
}

/** The result of a cold boot benchmark. */
export interface ColdBoot {
  template: string;
  coldBootMs: number;
  accel: Accel;
}

/** What a snapshot call answers (needs a server that supports snapshots). */
export interface SnapshotInfo {
  id: string;
  [key: string]: unknown;
}

/** A saved sandbox (memory, processes, disk), as `client.snapshots` answers it. */
export interface Snapshot {
  id: string;
  teamId: string;
  /** Unique in the team. */
  name: string;
  /** The sandbox it was taken of. */
  sandboxId: string;
  template: string;
  templateId: string;
  host: string;
  sizeBytes: number;
  createdAt: Date;
  /** Where it is exported in the server's object storage (what `snapshots.import` takes); absent until exported. */
  objectKey?: string;
  /** When the export finished. */
  exportedAt?: Date;
  /** Why the last export failed; absent when it did not. */
  exportError?: string;
}

/** Options of `snapshots.import`. */
export interface ImportSnapshotOptions extends RequestOptions {
  /** The new snapshot's name (default: the exported one). */
  name?: string;
}

/** @internal */
export interface WireSnapshot {
  id: string;
  team_id: string;
  name: string;
  sandbox_id: string;
  template: string;
  template_id: string;
  host: string;
  size_bytes: number;
  created_at: string;
  object_key?: string;
  exported_at?: string;
  export_error?: string;
}

/** @internal */
export function toSnapshot(w: WireSnapshot): Snapshot {
  const s: Snapshot = {
    id: w.id,
    teamId: w.team_id,
    name: w.name,
    sandboxId: w.sandbox_id,
    template: w.template,
    templateId: w.template_id,
    host: w.host,
    sizeBytes: w.size_bytes,
    createdAt: new Date(w.created_at),
  };
  if (w.object_key) s.objectKey = w.object_key;
  if (w.exported_at) s.exportedAt = new Date(w.exported_at);
  if (w.export_error) s.exportError = w.export_error;
  return s;
}

// ---- wire shapes (snake_case JSON, exactly as in api/openapi.yaml) ----

export interface WireError {
  error: { code: string; message: string };
}

export interface WireSandbox {
  id: string;
  team_id: string;
  template: string;
  template_id: string;
  state: SandboxState;
  host: string;
  accel: Accel;
  metadata: Record<string, string>;
  env?: Record<string, string>;
  cpus: number;
  memory_mib: number;
  created_at: string;
  /** Absent for a service machine. */
  expires_at: string;
  ended_at?: string;
  end_reason?: string;
  network?: WireNetworkPolicy;
  domain?: string;
  volumes?: VolumeMount[];
  auto_hibernate_seconds?: number;
  lifetime?: Lifetime;
  managed_by?: string;
  on_expiry?: string;
}

export interface WireNetworkPolicy {
  egress?: string;
  allow_cidrs?: string[];
  deny_cidrs?: string[];
  allow_domains?: string[];
  public_ports?: number[];
  denied_connections?: number;
}

export interface WireSandboxList {
  sandboxes: WireSandbox[];
}

export interface WireCreateSandboxRequest {
  template?: string;
  snapshot?: string;
  cpus?: number;
  memory_mib?: number;
  disk_gib?: number;
  ttl_seconds?: number;
  metadata?: Record<string, string>;
  env?: Record<string, string>;
  network?: WireNetworkPolicy;
  volumes?: VolumeMount[];
  auto_hibernate_seconds?: number;
  lifetime?: Lifetime;
  on_expiry?: string;
}

export interface WireExecRequest {
  cmd?: string;
  args?: string[];
  env?: Record<string, string>;
  cwd?: string;
  user?: string;
  timeout_seconds?: number;
  stdin?: string;
  stdin_base64?: string;
  background?: boolean;
}

export interface WireExecResult {
  exit_code: number;
  signal?: string;
  timed_out: boolean;
  duration_ms: number;
}

/** One NDJSON line of a command stream. */
export type WireExecEvent =
  | { type: "start"; pid: number }
  | { type: "stdout" | "stderr"; data: string }
  | { type: "exit"; result: WireExecResult }
  | { type: "error"; error: { code: string; message: string } };

/** One NDJSON line of a template build. */
export type WireBuildEvent =
  | { type: "log"; line: string }
  | { type: "done"; template: WireTemplate }
  | { type: "error"; error: { code: string; message: string } };

export interface WireProcess {
  pid: number;
  cmd: string;
  args: string[];
  background: boolean;
  running: boolean;
  exit_code?: number;
  started_at: string;
}

export interface WireFileInfo {
  name: string;
  path: string;
  size: number;
  mode: number;
  is_dir: boolean;
  mod_time: string;
  symlink_target?: string;
}

export interface WireTemplate {
  team_id?: string;
  name: string;
  id: string;
  cpus: number;
  memory_mib: number;
  disk_mib: number;
  accel: Accel;
  built_at: string;
  build_ms: number;
}

export interface WireCreatedKey {
  id: string;
  key: string;
  team: string;
  team_id: string;
  name: string;
  prefix: string;
  admin: boolean;
}

export interface WireKey {
  id: string;
  team: string;
  team_id: string;
  name: string;
  prefix: string;
  admin: boolean;
  created_at: string;
  revoked_at?: string;
}

export interface WireQuotas {
  team: string;
  team_id: string;
  max_sandboxes: number;
  max_service_machines: number;
  max_snapshots: number;
  max_volumes: number;
  max_concurrent_builds: number;
  max_vcpus: number;
  max_memory_mib: number;
  max_disk_gib?: number;
  requests_per_second: number;
  burst: number;
  overridden: string[];
  usage: {
    sandboxes: number;
    service_machines: number;
    snapshots: number;
    volumes: number;
    builds: number;
    vcpus: number;
    memory_mib: number;
    disk_mib?: number;
  };
}

export interface WireColdBoot {
  template: string;
  cold_boot_ms: number;
  accel: Accel;
}

// ---- conversions ----

export function toSandboxInfo(w: WireSandbox): SandboxInfo {
  return {
    id: w.id,
    teamId: w.team_id,
    template: w.template,
    templateId: w.template_id,
    state: w.state,
    host: w.host,
    accel: w.accel,
    metadata: w.metadata ?? {},
    env: w.env ?? {},
    cpus: w.cpus,
    memoryMib: w.memory_mib,
    createdAt: new Date(w.created_at),
    expiresAt: new Date(w.expires_at),
    endedAt: w.ended_at ? new Date(w.ended_at) : undefined,
    endReason: w.end_reason || undefined,
    network: w.network ? toNetworkPolicy(w.network) : undefined,
    domain: w.domain || "localhost",
    volumes: w.volumes ?? [],
    autoHibernateSeconds: w.auto_hibernate_seconds ?? 0,
    lifetime: w.lifetime ?? "sandbox",
    managedBy: w.managed_by || undefined,
    onExpiry: w.on_expiry === "hibernate" ? "hibernate" : "kill",
  };
}

export function toNetworkPolicy(w: WireNetworkPolicy): NetworkPolicy {
  const p: NetworkPolicy = {};
  if (w.egress === "allow" || w.egress === "deny") p.egress = w.egress;
  if (w.allow_cidrs) p.allowCidrs = w.allow_cidrs;
  if (w.deny_cidrs) p.denyCidrs = w.deny_cidrs;
  if (w.allow_domains) p.allowDomains = w.allow_domains;
  if (w.public_ports) p.publicPorts = w.public_ports;
  return p;
}

export function fromNetworkPolicy(p: NetworkPolicy): WireNetworkPolicy {
  const w: WireNetworkPolicy = {};
  if (p.egress !== undefined) w.egress = p.egress;
  if (p.allowCidrs !== undefined) w.allow_cidrs = p.allowCidrs;
  if (p.denyCidrs !== undefined) w.deny_cidrs = p.denyCidrs;
  if (p.allowDomains !== undefined) w.allow_domains = p.allowDomains;
  if (p.publicPorts !== undefined) w.public_ports = p.publicPorts;
  return w;
}

export function toProcessInfo(w: WireProcess): ProcessInfo {
  return {
    pid: w.pid,
    cmd: w.cmd,
    args: w.args ?? [],
    background: w.background,
    running: w.running,
    exitCode: w.exit_code,
    startedAt: new Date(w.started_at),
  };
}

export function toFileInfo(w: WireFileInfo): FileInfo {
  return {
    name: w.name,
    path: w.path,
    size: w.size,
    mode: w.mode,
    isDir: w.is_dir,
    modTime: new Date(w.mod_time),
    symlinkTarget: w.symlink_target || undefined,
  };
}

export function toTemplate(w: WireTemplate): Template {
  return {
    ...(w.team_id ? { teamId: w.team_id } : {}),
    name: w.name,
    id: w.id,
    cpus: w.cpus,
    memoryMib: w.memory_mib,
    diskMib: w.disk_mib,
    accel: w.accel,
    builtAt: new Date(w.built_at),
    buildMs: w.build_ms,
  };
}

export function toCreatedKey(w: WireCreatedKey): CreatedKey {
  return { id: w.id, key: w.key, team: w.team, teamId: w.team_id, name: w.name, prefix: w.prefix, admin: w.admin };
}

export function toKey(w: WireKey): Key {
  return {
    id: w.id,
    team: w.team,
    teamId: w.team_id,
    name: w.name,
    prefix: w.prefix,
    admin: w.admin,
    createdAt: new Date(w.created_at),
    revokedAt: w.revoked_at ? new Date(w.revoked_at) : undefined,
  };
}

export function toQuotas(w: WireQuotas): Quotas {
  const u = w.usage;
  return {
    team: w.team,
    teamId: w.team_id,
    maxSandboxes: w.max_sandboxes,
    maxServiceMachines: w.max_service_machines,
    maxSnapshots: w.max_snapshots,
    maxVolumes: w.max_volumes,
    maxConcurrentBuilds: w.max_concurrent_builds,
    maxVcpus: w.max_vcpus,
    maxMemoryMib: w.max_memory_mib,
    maxDiskGib: w.max_disk_gib ?? 0,
    requestsPerSecond: w.requests_per_second,
    burst: w.burst,
    overridden: w.overridden ?? [],
    usage: {
      sandboxes: u.sandboxes,
      serviceMachines: u.service_machines,
      snapshots: u.snapshots,
      volumes: u.volumes,
      builds: u.builds,
      vcpus: u.vcpus,
      memoryMib: u.memory_mib,
      diskMib: u.disk_mib ?? 0,
    },
  };
}

const QUOTA_WIRE_NAMES: Record<keyof QuotaUpdate, string> = {
  maxSandboxes: "max_sandboxes",
  maxServiceMachines: "max_service_machines",
  maxSnapshots: "max_snapshots",
  maxVolumes: "max_volumes",
  maxConcurrentBuilds: "max_concurrent_builds",
  maxVcpus: "max_vcpus",
  maxMemoryMib: "max_memory_mib",
  maxDiskGib: "max_disk_gib",
  requestsPerSecond: "requests_per_second",
  burst: "burst",
};

/** The PUT body of a QuotaUpdate: given fields only, null kept (it resets a limit). */
export function quotaUpdateBody(u: QuotaUpdate): Record<string, number | null> {
  const out: Record<string, number | null> = {};
  for (const [k, v] of Object.entries(u)) {
    const wire = QUOTA_WIRE_NAMES[k as keyof QuotaUpdate];
    if (wire === undefined) throw new TypeError(`unknown quota ${k}`);
    if (v !== undefined) out[wire] = v as number | null;
  }
  return out;
}
