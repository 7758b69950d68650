/**
 * The redundant tier's set of backends (issue #17): each backend's provider, price and
 * measured speed (the planner's input, planner.ts), and whether it is down — a backend that
 * fails is marked down (persisted in the placement store) until a probe finds it answering.
 * RedundantProvider holds one and forwards its public backend methods here.
 */
import { NotFoundError } from '../errors.ts';
import type { Provider } from '../provider.ts';
import type { BackendStats } from './planner.ts';
import type { PlacementStore } from './placement-store.ts';

/** Recent samples kept per backend for its latency and its throughput. */
const SAMPLES = 16;

export interface BackendConfig {
  /** Stable id, recorded in the placement store (e.g. 's3-eu', 'dropbox'). */
  readonly id: string;
  readonly provider: Provider;
  /** Storage price per GB-month (from config or the cost model); ties in classification. */
  readonly pricePerGbMonth?: number;
}

export interface BackendHealth {
  readonly id: string;
  readonly name: string;
  readonly state: 'available' | 'down';
  readonly downSince?: number;
  /** Outage-log entries waiting for this backend. */
  readonly owed: number;
}

/** One backend of the set, as the tier sees it now. */
export interface Live {
  readonly id: string;
  provider: Provider;
  readonly price: number;
  downSince: number | undefined;
  readonly latencyMs: number[];
  readonly throughputBps: number[];
}

export class BackendSet {
  private readonly live = new Map<string, Live>();

  constructor(
    private readonly store: PlacementStore,
    /** The key a probe stats (absent is an answer too). */
    private readonly probeKey: string,
  ) {}

  /** Add a backend; the promise resolves once its recorded state (down since …) is read. */
  add(b: BackendConfig): Promise<void> {
    if (this.live.has(b.id)) throw new RangeError(`redundant: backend ${b.id} is already in the set`);
    const live: Live = {
      id: b.id,
      provider: b.provider,
      price: b.pricePerGbMonth ?? 0,
      downSince: undefined,
      latencyMs: [],
      throughputBps: [],
    };
    this.live.set(b.id, live);
    return this.store.downSince(b.id).then((since) => {
      // A failure seen meanwhile keeps its own time; the recorded one is older or the same.
      if (since !== undefined && this.live.get(b.id) === live) live.downSince = since;
    });
  }

  /** Take a backend out of the set; its provider is closed. */
  async drop(id: string): Promise<void> {
    const b = this.live.get(id);
    this.live.delete(id);
    await this.store.setUp(id);
    await b?.provider.close?.();
  }

  ids(): string[] {
    return [...this.live.keys()];
  }

  get(id: string): Live | undefined {
    return this.live.get(id);
  }

  /** The backend when it is in the set and not down. */
  up(id: string): Live | undefined {
    const b = this.live.get(id);
    return b !== undefined && b.downSince === undefined ? b : undefined;
  }

  async health(): Promise<BackendHealth[]> {
    return Promise.all(
      [...this.live.values()].map(async (b) => ({
        id: b.id,
        name: b.provider.name,
        state: b.downSince === undefined ? ('available' as const) : ('down' as const),
        ...(b.downSince === undefined ? {} : { downSince: b.downSince }),
        owed: await this.store.logCount(b.id),
      })),
    );
  }

  /** Note a backend failure: it counts as down until a probe finds it answering. */
  markDown(id: string): void {
    const b = this.live.get(id);
    if (!b || b.downSince !== undefined) return;
    b.downSince = Date.now();
    // Recorded for the status (and a restart); the in-memory mark is what the tier acts on.
    this.store.setDown(id, b.downSince).catch(() => undefined);
  }

  /**
   * Ask every backend (or one) whether it answers; `replay` runs for one that comes back or
   * still has outage-log entries waiting.
   */
  async probe(only: string | undefined, replay: (id: string) => Promise<void>): Promise<void> {
    for (const b of [...this.live.values()]) {
      if (only !== undefined && b.id !== only) continue;
      const started = Date.now();
      try {
        await b.provider.stat(this.probeKey).catch((e: unknown) => {
          if (!(e instanceof NotFoundError)) throw e;
        });
      } catch {
        this.markDown(b.id);
        continue;
      }
      sample(b.latencyMs, Date.now() - started);
      const wasDown = b.downSince !== undefined;
      b.downSince = undefined;
      await this.store.setUp(b.id);
      if (wasDown || (await this.store.logCount(b.id)) > 0) await replay(b.id);
    }
  }

  stats(ids: readonly string[]): BackendStats[] {
    return ids.map((id) => {
      const b = this.live.get(id);
      return {
        id,
        available: b !== undefined && b.downSince === undefined,
        latencyMs: b?.latencyMs ?? [],
        // Until measured, every backend is assumed to move 10 MB/s.
        throughputBps: b?.throughputBps.length ? b.throughputBps : [10e6],
        pricePerGbMonth: b?.price ?? 0,
      };
    });
  }

  /** A backend's own recent samples (empty until measured; `stats` assumes a default then). */
  measured(id: string): { latencyMs: readonly number[]; throughputBps: readonly number[] } {
    const b = this.live.get(id);
    return { latencyMs: b?.latencyMs ?? [], throughputBps: b?.throughputBps ?? [] };
  }

  recordTransfer(id: string, bytes: number, ms: number): void {
    const b = this.live.get(id);
    if (!b) return;
    if (bytes >= 64 * 1024 && ms > 0) sample(b.throughputBps, (bytes * 1000) / ms);
    else sample(b.latencyMs, ms);
  }

  async close(): Promise<void> {
    for (const b of this.live.values()) await b.provider.close?.();
  }
}

function sample(list: number[], v: number): void {
  list.push(v);
  if (list.length > SAMPLES) list.shift();
}
