/**
 * What the tests of the redundant tier's maintenance share (storage-maintenance.test.ts on
 * SQLite, redundant-controller-jobs.test.ts on PostgreSQL): a clock whose timers fire only
 * when the test says, a tier over five directory backends, and its StorageMaintenance on
 * that clock.
 */
import pino from 'pino';
import { Registry } from 'prom-client';
import { FsProvider } from '@weft/providers';
import {
  openRedundantProvider,
  type PlacementStore,
  type RedundantProvider,
} from '@weft/providers/redundant';
import { openBackend } from '../src/redundant-tier.ts';
import {
  StorageMaintenance,
  type StorageMaintenanceOptions,
  type Timers,
} from '../src/storage-maintenance.ts';

export const KiB = 1024;
export const HOUR = 3600_000;

/** Timers on a clock that moves only when the test says. */
export class FakeClock implements Timers {
  t = 1_800_000_000_000;
  private seq = 0;
  private readonly due = new Map<number, { at: number; fn: () => void }>();
  now = (): number => this.t;
  set(fn: () => void, ms: number): unknown {
    const id = ++this.seq;
    this.due.set(id, { at: this.t + Math.max(0, ms), fn });
    return id;
  }
  clear(handle: unknown): void {
    this.due.delete(handle as number);
  }
  get pending(): number {
    return this.due.size;
  }
  /** Move to the earliest timer and fire it; false when none is set. */
  fireNext(): boolean {
    const next = [...this.due.entries()].sort((a, b) => a[1].at - b[1].at)[0];
    if (!next) return false;
    this.due.delete(next[0]);
    this.t = Math.max(this.t, next[1].at);
    next[1].fn();
    return true;
  }
}

export interface FsTierOptions {
  /** The backends' ids: `${idPrefix}0`, `${idPrefix}1`, … */
  readonly idPrefix: string;
  /** The tier's own folder. */
  readonly dir: string;
  readonly maxShardBytes: number;
  /** The placement store (default: SQLite in `dir`). */
  readonly store?: PlacementStore;
  /** Open the backends' folders as private (0700). */
  readonly private?: boolean;
}

/** A redundant tier over a directory backend in each of `roots` (64 KiB threshold, no probes). */
export async function fsTier(roots: readonly string[], o: FsTierOptions): Promise<RedundantProvider> {
  return openRedundantProvider({
    backends: await Promise.all(
      roots.map(async (root, i) => ({
        id: `${o.idPrefix}${i}`,
        provider: await FsProvider.open({
          root,
          portable: false,
          maxJournal: 100,
          ...(o.private ? { private: true } : {}),
        }),
      })),
    ),
    dir: o.dir,
    ...(o.store ? { store: o.store } : {}),
    thresholdBytes: 64 * KiB,
    maxShardBytes: o.maxShardBytes,
    probeIntervalMs: 0,
  });
}

/**
 * The maintenance of `tier` on `clock` (its time and timers), logging nothing, with a
 * registry of its own and the real backend opener unless `extra` says otherwise.
 */
export function maintenanceOf(
  tier: RedundantProvider,
  clock: FakeClock,
  extra: Pick<StorageMaintenanceOptions, 'dir' | 'schedule'> & Partial<StorageMaintenanceOptions>,
): StorageMaintenance {
  return new StorageMaintenance({
    tier,
    layout: { replicas: tier.replicas, k: tier.k, m: tier.m, thresholdBytes: tier.thresholdBytes },
    log: pino({ level: 'silent' }),
    registry: new Registry(),
    openBackend,
    now: clock.now,
    timers: clock,
    ...extra,
  });
}
