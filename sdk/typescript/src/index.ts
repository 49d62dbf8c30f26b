/**
 * @pandastack/sdk: the TypeScript/JavaScript client for PandaStack, which
 * runs untrusted code in QEMU microVM sandboxes.
 *
 * ```ts
 * import { PandaStack } from "@pandastack/sdk";
 * const client = new PandaStack(); // PANDASTACK_API_KEY, PANDASTACK_BASE_URL
 * const sandbox = await client.sandboxes.create({ template: "base" });
 * try {
 *   const r = await sandbox.exec("echo hello");
 *   console.log(r.stdout, r.exitCode);
 * } finally {
 *   await sandbox.kill();
 * }
 * ```
 *
 * Zero dependencies; uses only fetch, ReadableStream and TextEncoder/
 * TextDecoder, so it runs on Node 20+, Bun, Deno and edge runtimes.
 */

export { PandaStack, Templates, Keys, Volumes, QuotasAPI, Snapshots, DEFAULT_BASE_URL, type ClientOptions } from "./client.js";
export { Databases, type Database, type DatabaseBackup, type DatabaseBackupList } from "./databases.js";
export { Apps, deployDone, type App, type CreateAppParams, type Deploy, type DeployStatus, type Preview } from "./apps.js";
export { Sandbox, Sandboxes, CommandHandle } from "./sandbox.js";
export { Filesystem, type ReadOptions } from "./filesystem.js";
export {
  PandaStackError,
  InvalidArgumentError,
  AuthenticationError,
  PermissionDeniedError,
  NotFoundError,
  MethodNotAllowedError,
  ConflictError,
  GoneError,
  PayloadTooLargeError,
  OutputTooLargeError,
  RateLimitError,
  QuotaExceededError,
  InternalServerError,
  InsufficientStorageError,
  UnavailableError,
  RequestTimeoutError,
  APIConnectionError,
  type ErrorCode,
  type PandaStackErrorInit,
} from "./errors.js";
export { encodeBase64, decodeBase64 } from "./base64.js";
export { VERSION } from "./version.js";
export { packBuildContext, SPEC_ENTRY } from "./buildcontext.js";
export type { Execution, ExecutionError, CodeResult, RunCodeOptions } from "./code.js";
export type {
  Accel,
  SandboxState,
  Lifetime,
  Health,
  SandboxInfo,
  NetworkPolicy,
  NetworkStatus,
  PortUrl,
  CreateSandboxParams,
  ListSandboxesParams,
  RequestOptions,
  OutputCallback,
  ExecOptions,
  AttachOptions,
  ExecResult,
  ProcessInfo,
  FileInfo,
  WriteData,
  WriteOptions,
  RemoveOptions,
  Template,
  TemplateVersion,
  CreatedKey,
  CreateKeyParams,
  Key,
  Quotas,
  QuotaUsage,
  QuotaUpdate,
  ColdBoot,
  SnapshotInfo,
  Snapshot,
  ImportSnapshotOptions,
  Volume,
  VolumeMount,
  WireError,
  WireSandbox,
  WireExecRequest,
  WireExecResult,
  WireExecEvent,
  WireBuildEvent,
  WireProcess,
  WireFileInfo,
  WireTemplate,
  WireCreatedKey,
  WireKey,
  WireQuotas,
} from "./types.js";
export { Terminal, type TerminalOptions, type TerminalExit } from "./terminal.js";
export { type FileEvent, type WatchHandle, type WatchOptions } from "./watch.js";
