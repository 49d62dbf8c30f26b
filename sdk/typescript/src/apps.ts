import { APIConnectionError, RequestTimeoutError } from "./errors.js";
import type { HttpClient } from "./http.js";
import { describe, isAbort } from "./ndjson.js";
import type { RequestOptions } from "./types.js";

/** A git repository served at `NAME.apps.DOMAIN`. */
export interface App {
  id: string;
  teamId: string;
  name: string;
  /** The repository deploys clone; "" for an app deployed by pushing to its git remote. */
  gitUrl: string;
  branch: string;
  /** The names of the app's env vars (their values are sealed at rest and never listed). */
  envKeys: string[];
  buildCommand?: string | undefined;
  startCommand?: string | undefined;
  port?: number | undefined;
  healthPath: string;
  healthTimeoutSeconds: number;
  /** Scale to zero: the release hibernates after that many idle seconds (0: never). */
  autoHibernateSeconds: number;
  /** The deploy whose release takes the app's traffic ("" before the first one goes live). */
  liveDeployId: string;
  url: string;
  /** Where GitHub posts pushes (path under the base URL). */
  webhookUrl: string;
  /** The app's own git remote (path under the base URL): a push to the app's branch deploys it. */
  gitRemote: string;
  /** Signs GitHub's pushes; in create's answer only. */
  webhookSecret?: string | undefined;
  createdAt: Date;
}

/** queued, building, deploying, then live, failed or superseded (the last three are final). */
export type DeployStatus = "queued" | "building" | "deploying" | "live" | "failed" | "superseded" | (string & {});

/** One build of an app and, when it went live, its release. */
export interface Deploy {
  id: string;
  appId: string;
  status: DeployStatus;
  /** The branch or tag built; `commit` the commit it resolved to. */
  ref: string;
  commit?: string | undefined;
  /** The detected framework: next, vite, cra, node, static, python or custom. */
  framework?: string | undefined;
  /** Why a failed deploy failed. */
  error?: string | undefined;
  /** The GitHub delivery that asked for it. */
  deliveryId?: string | undefined;
  /** The pull request a preview deploy builds (unset: a deploy of the app itself). */
  preview?: number | undefined;
  /** The build log so far (`get` and `wait` only). */
  log?: string | undefined;
  createdAt: Date;
  updatedAt: Date;
}

/** Creates an app. `gitUrl` unset: deployed by pushing to its git remote; the rest overrides detection. */
export interface CreateAppParams extends RequestOptions {
  name: string;
  gitUrl?: string;
  branch?: string;
  /** Given to builds and the running app; sealed at rest and masked in build logs. */
  env?: Record<string, string>;
  buildCommand?: string;
  startCommand?: string;
  port?: number;
  healthPath?: string;
  healthTimeoutSeconds?: number;
  autoHibernateSeconds?: number;
}

/** @internal */
export interface WireApp {
  id: string;
  team_id: string;
  name: string;
  git_url: string;
  branch: string;
  env_keys: string[] | null;
  build_command?: string;
  start_command?: string;
  port?: number;
  health_path: string;
  health_timeout_seconds: number;
  auto_hibernate_seconds: number;
  live_deploy_id: string;
  url: string;
  webhook_url: string;
  git_remote: string;
  webhook_secret?: string;
  created_at: string;
}

/** @internal */
export interface WireDeploy {
  id: string;
  app_id: string;
  status: string;
  ref: string;
  commit?: string;
  framework?: string;
  error?: string;
  delivery_id?: string;
  preview?: number;
  log?: string;
  created_at: string;
  updated_at: string;
}

/** A pull request's preview of an app, served at `url` (pr-N--NAME.apps.DOMAIN) until the pull request closes. */
export interface Preview {
  appId: string;
  /** The pull request number. */
  number: number;
  headRef: string;
  headSha: string;
  /** The preview's newest deploy; `liveDeployId` the one serving it ("" before one went live). */
  deployId: string;
  liveDeployId: string;
  status?: DeployStatus | undefined;
  url: string;
  createdAt: Date;
  updatedAt: Date;
}

/** @internal */
export interface WirePreview {
  app_id: string;
  number: number;
  head_ref: string;
  head_sha: string;
  deploy_id: string;
  live_deploy_id: string;
  status?: string;
  url: string;
  created_at: string;
  updated_at: string;
}

/** @internal */
export function toPreview(w: WirePreview): Preview {
  return {
    appId: w.app_id,
    number: w.number,
    headRef: w.head_ref,
    headSha: w.head_sha,
    deployId: w.deploy_id,
    liveDeployId: w.live_deploy_id,
    status: (w.status || undefined) as DeployStatus | undefined,
    url: w.url,
    createdAt: new Date(w.created_at),
    updatedAt: new Date(w.updated_at),
  };
}

/** @internal */
export function toApp(w: WireApp): App {
  return {
    id: w.id,
    teamId: w.team_id,
    name: w.name,
    gitUrl: w.git_url ?? "",
    branch: w.branch,
    envKeys: w.env_keys ?? [],
    buildCommand: w.build_command,
    startCommand: w.start_command,
    port: w.port,
    healthPath: w.health_path,
    healthTimeoutSeconds: w.health_timeout_seconds,
    autoHibernateSeconds: w.auto_hibernate_seconds ?? 0,
    liveDeployId: w.live_deploy_id ?? "",
    url: w.url,
    webhookUrl: w.webhook_url,
    gitRemote: w.git_remote,
    webhookSecret: w.webhook_secret,
    createdAt: new Date(w.created_at),
  };
}

/** @internal */
export function toDeploy(w: WireDeploy): Deploy {
  return {
    id: w.id,
    appId: w.app_id,
    status: w.status,
    ref: w.ref,
    commit: w.commit || undefined,
    framework: w.framework || undefined,
    error: w.error || undefined,
    deliveryId: w.delivery_id || undefined,
    preview: w.preview || undefined,
    log: w.log,
    createdAt: new Date(w.created_at),
    updatedAt: new Date(w.updated_at),
  };
}

/** Whether a deploy has finished: live, failed or superseded. */
export function deployDone(d: Deploy): boolean {
  return d.status === "live" || d.status === "failed" || d.status === "superseded";
}

/**
 * `client.apps`: git-driven app hosting. A deploy clones the app's repository (its `gitUrl`, or
 * what was pushed to its own git remote), detects the framework, builds it in a microVM and
 * releases it as a memory snapshot of the running app, served at the app's `url`.
 */
export class Apps {
  readonly #http: HttpClient;
  readonly #apiKey: string | undefined;
  /** @internal */
  constructor(http: HttpClient, apiKey?: string) {
    this.#http = http;
    this.#apiKey = apiKey;
  }

  /**
   * Records an app (nothing is built until a deploy). A taken name throws ConflictError, a bad one
   * InvalidArgumentError, a git URL on the server's own networks PermissionDeniedError.
   */
  async create(params: CreateAppParams): Promise<App> {
    const body: Record<string, unknown> = { name: params.name };
    const fields: [string, unknown][] = [
      ["git_url", params.gitUrl],
      ["branch", params.branch],
      ["env", params.env],
      ["build_command", params.buildCommand],
      ["start_command", params.startCommand],
      ["port", params.port],
      ["health_path", params.healthPath],
      ["health_timeout_seconds", params.healthTimeoutSeconds],
      ["auto_hibernate_seconds", params.autoHibernateSeconds],
    ];
    for (const [k, v] of fields) if (v !== undefined) body[k] = v;
    return toApp(await this.#http.json<WireApp>({ method: "POST", path: "/v1/apps", json: body, signal: params.signal }));
  }

  /** Lists the team's apps, oldest first. */
  async list(opts: RequestOptions = {}): Promise<App[]> {
    const w = await this.#http.json<{ apps: WireApp[] | null }>({ method: "GET", path: "/v1/apps", signal: opts.signal });
    return (w.apps ?? []).map(toApp);
  }

  async get(name: string, opts: RequestOptions = {}): Promise<App> {
    return toApp(await this.#http.json<WireApp>({ method: "GET", path: appPath(name), signal: opts.signal }));
  }

  /** Deletes an app with its route, machines, snapshots and git remote. */
  async delete(name: string, opts: RequestOptions = {}): Promise<void> {
    await this.#http.json<unknown>({ method: "DELETE", path: appPath(name), signal: opts.signal });
  }

  /**
   * Queues a deploy of the app's branch (or `ref`, a branch or tag); resolves with it, queued (see
   * `wait`). ConflictError for an app with no git URL and nothing pushed yet.
   */
  async deploy(name: string, opts: { ref?: string } & RequestOptions = {}): Promise<Deploy> {
    const w = await this.#http.json<WireDeploy>({
      method: "POST",
      path: appPath(name) + "/deploys",
      json: opts.ref ? { ref: opts.ref } : {},
      signal: opts.signal,
    });
    return toDeploy(w);
  }

  /** Lists the app's deploys, newest first, without logs. */
  async deploys(name: string, opts: RequestOptions = {}): Promise<Deploy[]> {
    const w = await this.#http.json<{ deploys: WireDeploy[] | null }>({ method: "GET", path: appPath(name) + "/deploys", signal: opts.signal });
    return (w.deploys ?? []).map(toDeploy);
  }

  /** Lists the app's pull request previews, by number (GitHub's pull_request webhook opens, updates and removes them). */
  async previews(name: string, opts: RequestOptions = {}): Promise<Preview[]> {
    const w = await this.#http.json<{ previews: WirePreview[] | null }>({ method: "GET", path: appPath(name) + "/previews", signal: opts.signal });
    return (w.previews ?? []).map(toPreview);
  }

  /** Fetches a deploy with its log so far. */
  async getDeploy(name: string, id: string, opts: RequestOptions = {}): Promise<Deploy> {
    return toDeploy(await this.#http.json<WireDeploy>({ method: "GET", path: deployPath(name, id), signal: opts.signal }));
  }

  /** A deploy's build log as text (env values masked). */
  async logs(name: string, id: string, opts: RequestOptions = {}): Promise<string> {
    const path = deployPath(name, id) + "/logs";
    const resp = await this.#http.send({ method: "GET", path, accept: "text/plain", signal: opts.signal });
    try {
      return await resp.text();
    } catch (cause) {
      if (isAbort(cause)) throw cause;
      throw new APIConnectionError({ status: 0, code: "connection_error", message: `GET ${path}: ${describe(cause)}`, cause });
    }
  }

  /**
   * Polls a deploy until it is live, failed or superseded and resolves with it (with its log). A
   * failed deploy resolves, not rejects: its `error` says why. RequestTimeoutError after
   * `timeoutMs` (default 15 minutes).
   */
  async wait(name: string, id: string, opts: { timeoutMs?: number; pollMs?: number } & RequestOptions = {}): Promise<Deploy> {
    const deadline = Date.now() + (opts.timeoutMs ?? 15 * 60_000);
    for (;;) {
      const d = await this.getDeploy(name, id, opts);
      if (deployDone(d)) return d;
      if (Date.now() >= deadline) {
        throw new RequestTimeoutError({ status: 0, code: "timeout", message: `deploy ${id} of app ${name} still ${d.status}` });
      }
      await new Promise((r) => setTimeout(r, opts.pollMs ?? 1000));
    }
  }

  /**
   * Serves a previous release again: `deployId`'s, by default the one live before the current one.
   * Resolves with that deploy, live; nothing is rebuilt.
   */
  async rollback(name: string, opts: { deployId?: string } & RequestOptions = {}): Promise<Deploy> {
    const w = await this.#http.json<WireDeploy>({
      method: "POST",
      path: appPath(name) + "/rollback",
      json: opts.deployId ? { deploy_id: opts.deployId } : {},
      signal: opts.signal,
    });
    return toDeploy(w);
  }

  /**
   * The URL of the app's own git remote: `git push URL BRANCH` deploys. Git's password is the API
   * key (any user name); with `withKey` it is put in the URL (keep such a URL secret).
   */
  async gitRemoteUrl(name: string, opts: { withKey?: boolean } & RequestOptions = {}): Promise<string> {
    const a = await this.get(name, opts);
    const u = new URL(this.#http.baseUrl + a.gitRemote);
    if (opts.withKey && this.#apiKey) {
      u.username = "pandastack";
      u.password = this.#apiKey;
    }
    return u.toString();
  }
}

function appPath(name: string): string {
  return `/v1/apps/${encodeURIComponent(name)}`;
}

function deployPath(name: string, id: string): string {
  return `${appPath(name)}/deploys/${encodeURIComponent(id)}`;
}
