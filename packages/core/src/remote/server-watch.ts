/**
 * The agent's watch over the proxy instances (issue #18): every probeEveryMs it asks each
 * instance whose backoff allows it for the instance list (`GET /v1/cluster/instances`, with
 * the device token), and times the answer. That one request is the probe: it passes only
 * where the instance can authenticate the device in the shared database — one cut off from
 * PostgreSQL answers `/healthz` but not this, and must not look near. The round trips rank
 * the instances (server-pool.ts), the current one's list (else any) updates the pool, the
 * pool may move back to a nearer one, and the list is kept in `<stateDir>/servers.json` so
 * that a restarted agent whose enrolment server is gone still knows where else to go.
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import type { Disposable } from '../lifecycle.ts';
import { writePrivateFile } from '../private-file.ts';
import { RemoteError } from './http-errors.ts';
import type { ProxyClient } from './proxy-client.ts';
import { ServerPool, type ServerInstance, type ServerPoolOptions } from './server-pool.ts';

export const SERVERS_FILE = 'servers.json';

export interface ServerWatchOptions {
  readonly pool: ServerPool;
  /**
   * Ask the instance at `url` for the instance list (undefined: it has none to give, e.g. an
   * older server). Throws OfflineError when unreachable, RemoteError when refused.
   */
  readonly ask: (url: string, signal: AbortSignal) => Promise<readonly ServerInstance[] | undefined>;
  /** Where servers.json goes; absent: nothing is saved. */
  readonly stateDir?: string;
  /** Between probe rounds. Default 10 s. */
  readonly probeEveryMs?: number;
  /** A probe not answered by then counts as unreachable. Default 5 s. */
  readonly probeTimeoutMs?: number;
}

/** The pool saved for this enrolment, else a new one. */
export async function loadServerPool(stateDir: string, options: ServerPoolOptions): Promise<ServerPool> {
  try {
    const raw = await fsp.readFile(nodePath.join(stateDir, SERVERS_FILE), 'utf8');
    return ServerPool.restore(JSON.parse(raw), options);
  } catch {
    return new ServerPool(options);
  }
}

export class ServerWatch implements Disposable {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private saved = '';
  private stopped = false;
  private readonly moves: Disposable;

  constructor(private readonly o: ServerWatchOptions) {
    this.moves = o.pool.onMove(() => void this.save());
  }

  /** First round now, then every probeEveryMs. */
  start(): void {
    this.schedule(0);
  }

  /** One round: refresh the list when due, probe, reconsider, save. */
  round(): Promise<void> {
    this.running ??= this.doRound().finally(() => (this.running = undefined));
    return this.running;
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.round().finally(() => this.schedule(this.o.probeEveryMs ?? 10_000));
    }, ms);
    this.timer.unref?.();
  }

  private async doRound(): Promise<void> {
    const { pool } = this.o;
    const current = pool.current;
    let learnt: readonly ServerInstance[] | undefined;
    for (const { url } of pool.view()) {
      if (this.stopped) return;
      if (!pool.due(url)) continue;
      const started = performance.now();
      const signal = AbortSignal.timeout(this.o.probeTimeoutMs ?? 5_000);
      try {
        const list = await this.o.ask(url, signal);
        pool.answered(url, performance.now() - started);
        if (list && (url === current || !learnt)) learnt = list;
      } catch (e) {
        // Refused (a revoked token, an older server): it answered, so it is there.
        if (e instanceof RemoteError && e.status < 500) pool.answered(url, performance.now() - started);
        // Past its timeout: slow (a busy proxy, a loaded machine) or hung — a strike, as a 5xx
        // is; two in a row and it is down. Taken for down at once, the only instance's uploads
        // under way were abandoned and the agent said Offline (CI under load).
        else if (e instanceof RemoteError || signal.aborted) pool.failed(url, 'unavailable');
        else pool.failed(url, 'unreachable');
      }
    }
    if (learnt) pool.learn(learnt);
    pool.reconsider();
    await this.save();
  }

  private async save(): Promise<void> {
    if (!this.o.stateDir || this.stopped) return;
    const json = JSON.stringify(this.o.pool.snapshot(), null, 2);
    if (json === this.saved) return;
    this.saved = json;
    await writePrivateFile(nodePath.join(this.o.stateDir, SERVERS_FILE), json).catch(() => {
      this.saved = ''; // try again next time
    });
  }

  dispose(): void {
    this.stopped = true;
    this.moves.dispose();
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** Stop, after the round under way (tests and agent stop). */
  async stop(): Promise<void> {
    this.dispose();
    await this.running?.catch(() => undefined);
  }
}

/** The watch of a client built on a pool (`options.servers`), asking through its token. */
export function watchServers(
  client: ProxyClient,
  options: { readonly stateDir: string; readonly probeEveryMs?: number },
): ServerWatch | undefined {
  const pool = client.servers;
  if (!pool) return undefined;
  return new ServerWatch({
    pool,
    stateDir: options.stateDir,
    ...(options.probeEveryMs !== undefined ? { probeEveryMs: options.probeEveryMs } : {}),
    ask: async (url, signal) =>
      (await client.clusterInstancesAt(url, signal))?.instances.map((i) => ({
        url: i.url,
        id: i.id,
        state: i.state,
        availableBps: i.availableBps,
      })),
  });
}
