/**
 * The pack collector (docs/cost.md "Garbage collection of packs"): a periodic pass that
 * dates the dead entries of every pack (Packer.markDead), asks the cost model about each
 * pack holding dead bytes (CostService.decideGc: Coral's C_store ≥ C_clean) and repacks the
 * ones it says to. Every decision is logged with its inputs, every repack with its outcome,
 * and both are counted in the weft_pack_gc_* metrics.
 *
 * A repack is crash-safe on its own (Packer.repack: new pack durable and indexed before the
 * old one is deleted), so a pass killed at any point loses nothing; its dead entries are
 * found again at the next pass.
 */
import type { Logger } from 'pino';
import type { CostService } from '../cost/service.ts';
import type { Packer } from './packs.ts';

export interface PackGcPass {
  /** Entries first seen dead (and seen referenced again) in this pass. */
  readonly died: number;
  readonly revived: number;
  /** Packs the model was asked about, and the ones it said to repack. */
  readonly checked: number;
  readonly repacked: { packId: string; into: string; freedBytes: number; rewrittenBytes: number }[];
}

export interface PackCollectorOptions {
  readonly packer: Packer;
  readonly cost: CostService;
  readonly log: Logger;
  /** Between passes (ms); 0: no timer (tests and `RunningProxyServer.packGc()` call run()). */
  readonly intervalMs: number;
  readonly now?: () => number;
}

/** Delay before dating deaths after a delete or an overwrite (ms): one marking per burst. */
export const MARK_DELAY_MS = 1000;

/**
 * A marking looks at every pack entry; one is run for changes only once they number at least
 * the entries the last one looked at divided by this: at most this many entries looked at per
 * change, whatever the number of packed files. Marking once a second whatever the change
 * looked at every packed file again and again through an upload — quadratic: at 100,000
 * files 5 CPU-seconds of the proxy, ~50 µs a file and rising with the count (issue #16).
 * A look at an entry costs about a microsecond (its NOT EXISTS probe): 64 a change still
 * cost a 300,000-file upload ~85 µs of proxy CPU a file (measured); 4, ~5 at that rate.
 * Deaths it leaves undated wait for the changes that make a marking worth it — in a store of
 * 1,000,000 packed files, 250,000 — or for the collector's pass (hourly; its crossover is
 * days away).
 */
export const MARK_ENTRIES_PER_CHANGE = 4;

export class PackCollector {
  private timer: NodeJS.Timeout | undefined;
  private markTimer: NodeJS.Timeout | undefined;
  /** Changes since the last marking began, and the pack entries that marking looked at. */
  private changedSinceMark = 0;
  private markedEntries = 0;
  /** Markings run (tests). */
  markings = 0;
  private running: Promise<PackGcPass> | undefined;
  private readonly now: () => number;
  private closed = false;

  constructor(private readonly o: PackCollectorOptions) {
    this.now = o.now ?? Date.now;
  }

  start(): void {
    if (this.o.intervalMs <= 0 || this.timer) return;
    this.timer = setInterval(() => {
      void this.run().catch((err: unknown) => this.o.log.error({ err }, 'pack collection failed'));
    }, this.o.intervalMs);
    this.timer.unref();
  }

  /** Stop the timer (this process lost the controller role); a pass running finishes. */
  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /**
   * Date the deaths `changes` deletes or overwrites may have caused, MARK_DELAY_MS from now (a
   * burst of changes is marked once), once they are worth a marking (MARK_ENTRIES_PER_CHANGE).
   * The pass marks too; this keeps t_j close to the real death.
   */
  markSoon(changes = 1): void {
    this.changedSinceMark += changes;
    if (this.markTimer || this.closed) return;
    if (this.changedSinceMark * MARK_ENTRIES_PER_CHANGE < this.markedEntries) return;
    this.markTimer = setTimeout(() => {
      this.markTimer = undefined;
      this.changedSinceMark = 0;
      this.markings += 1;
      this.o.packer.markDead(this.now()).then(
        (r) => {
          this.markedEntries = r.entries;
        },
        (err: unknown) => {
          this.o.log.warn({ err }, 'dating dead pack entries failed; the next pass does it');
        },
      );
    }, MARK_DELAY_MS);
    this.markTimer.unref();
  }

  /** One pass now (a pass already running is awaited, then another runs). */
  async run(): Promise<PackGcPass> {
    while (this.running) await this.running.catch(() => undefined);
    this.running = this.pass();
    try {
      return await this.running;
    } finally {
      this.running = undefined;
    }
  }

  private async pass(): Promise<PackGcPass> {
    const { packer, cost, log } = this.o;
    const nowMs = this.now();
    const { died, revived, entries } = await packer.markDead(nowMs);
    this.markedEntries = entries;
    const candidates = await packer.gcCandidates();
    cost.setPackDeadBytes(candidates.reduce((n, c) => n + c.deadBytes, 0));
    const repacked: PackGcPass['repacked'][number][] = [];
    for (const c of candidates) {
      const d = cost.decideGc(c, nowMs);
      await packer.gcChecked(c.packId, nowMs);
      if (!d.repack) continue;
      const out = await packer.repackNow(c.packId);
      if (!out) continue; // gone meanwhile, or another process repacks it
      const outcome = {
        freedBytes: out.oldSize - out.newSize,
        rewrittenBytes: out.liveBytes,
        into: out.into,
        predictedCleanUsd: d.cClean,
      };
      cost.gcDone(c.packId, outcome);
      repacked.push({ packId: c.packId, ...outcome });
    }
    if (repacked.length > 0) {
      await packer.markDead(this.now());
      cost.setPackDeadBytes((await packer.gcCandidates()).reduce((n, c) => n + c.deadBytes, 0));
    }
    if (died + revived + repacked.length > 0)
      log.info(
        { gc: { died, revived, checked: candidates.length, repacked: repacked.length } },
        'pack gc pass',
      );
    return { died, revived, checked: candidates.length, repacked };
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    if (this.markTimer) clearTimeout(this.markTimer);
    this.timer = undefined;
    this.markTimer = undefined;
    while (this.running) await this.running.catch(() => undefined);
  }
}
