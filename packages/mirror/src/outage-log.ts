/**
 * Replica availability (DESIGN §5): a replica whose call fails is unavailable — the others
 * go on, and what is pending for it waits, in log order, in its outage log (the log
 * entries not yet done for it) — and is tried again (probed) after a backoff: at the next
 * round after the first failure, then on Weft's one retry policy (`@weft/providers/backoff`:
 * `first` doubling up to `max`, with jitter; a Retry-After the cloud sent, carried by the
 * provider's TransientError, is honoured, capped at `max`). Outages are persisted
 * (replica_outage) so a restarted engine keeps them; the first probe that goes through
 * ends one and its outage log replays.
 */
import type { Logger } from 'pino';
import { isTransient } from '@weft/providers';
import { type BackoffPolicy, backoffDelay } from '@weft/providers/backoff';
import type { Clock } from './clock.ts';
import type { MirrorStats, Replica } from './context.ts';
import { isAuthFailure, isQuotaExceeded } from './provider-failures.ts';
import type { Outage, OutageCause, ShareStore } from './store.ts';

/** Why a failed call makes its replica unavailable. */
export function outageCause(e: unknown): OutageCause {
  if (isQuotaExceeded(e)) return 'full';
  if (isAuthFailure(e)) return 'unauthorised';
  return 'failing';
}

/** One replica's state, as shown to its member and to the share's owner. */
export interface ReplicaStatus {
  readonly id: string;
  readonly member: string;
  /** 'unavailable': it cannot take writes (or be read); its outage log waits for it. */
  readonly state: 'available' | 'unavailable';
  /** Why (only when unavailable): full, unauthorised, or failing (5xx, network, other). */
  readonly cause?: OutageCause;
  /** When it became unavailable (ms since the epoch). */
  readonly sinceMs?: number;
  /** When it is tried again (ms since the epoch). */
  readonly nextProbeMs?: number;
  /** The last error's message. */
  readonly error?: string;
  /** Log entries not yet applied to it (its outage log while unavailable). */
  readonly waiting: number;
}

export interface OutageLogOptions {
  readonly store: ShareStore;
  readonly log: Logger;
  readonly now: Clock;
  readonly stats: MirrorStats;
  /** baseMs: the wait after the second failure in a row; capMs: the longest wait. */
  readonly probe: BackoffPolicy;
  /** Uniform in [0, 1), for the jitter (injected by tests). */
  readonly random: () => number;
}

/**
 * The wait before an unavailable replica is tried again after its `failures`-th failure in
 * a row: the first is tried again at the next round (a blip), unless the cloud said when
 * (Retry-After); then the policy's delay for failure n − 1.
 */
export function probeDelay(
  policy: BackoffPolicy,
  failures: number,
  e: unknown,
  random: () => number,
): number {
  const retryAfterMs = isTransient(e) ? e.retryAfterMs : undefined;
  if (failures <= 1 && retryAfterMs === undefined) return 0;
  return backoffDelay(policy, Math.max(1, failures - 1), { retryAfterMs, random });
}

export class OutageLog {
  /** Unavailable replicas (persisted in the store; see failed() and recovered()). */
  private readonly outages = new Map<string, Outage>();
  /** Unavailable replicas tried again in this round (their probe was due). */
  private readonly probing = new Set<string>();
  /** Replicas a call failed on in this round: not tried again before the next. */
  private readonly failedThisRound = new Set<string>();

  constructor(private readonly o: OutageLogOptions) {}

  /** Take in the outages a previous engine left. */
  async load(replicas: readonly Replica[]): Promise<void> {
    for (const r of replicas) {
      const o = await this.o.store.outage(r.id);
      if (o) this.outages.set(r.id, o);
    }
  }

  /** A round starts: unavailable replicas whose probe is due are tried in it. */
  beginRound(): void {
    this.failedThisRound.clear();
    this.probing.clear();
    const t = this.o.now();
    for (const [id, o] of this.outages) if (o.nextProbeMs <= t) this.probing.add(id);
  }

  /** A round ended: the probes that did not fail end their outages. */
  async endRound(): Promise<void> {
    for (const id of this.probing) if (!this.failedThisRound.has(id)) await this.recovered(id);
  }

  /** Unavailable (its probe may be under way in this round). */
  isDown(id: string): boolean {
    return this.outages.has(id);
  }

  /** Whether the engine reads replica `id` in this round. */
  readable(id: string): boolean {
    return (!this.outages.has(id) || this.probing.has(id)) && !this.failedThisRound.has(id);
  }

  /** Whether the engine writes to replica `id` in this round. */
  writable(id: string): boolean {
    return !this.failedThisRound.has(id) && (!this.outages.has(id) || this.probing.has(id));
  }

  get size(): number {
    return this.outages.size;
  }

  /** The earliest next probe of an unavailable replica (undefined: none is). */
  nextProbeMs(): number | undefined {
    if (this.outages.size === 0) return undefined;
    return Math.min(...[...this.outages.values()].map((o) => o.nextProbeMs));
  }

  /**
   * A call on `r` failed: it is unavailable (or stays so), tried again after a backoff; what
   * is pending for it waits, in order, in its outage log, and the others go on.
   */
  async failed(r: Replica, e: unknown, doing: string): Promise<void> {
    const again = this.failedThisRound.has(r.id);
    this.failedThisRound.add(r.id);
    this.o.stats.failures += 1;
    const t = this.o.now();
    const prev = this.outages.get(r.id);
    // One failed attempt per round: the calls already in flight when the first failed (up to
    // `concurrency` entries at once) fail with it, and must not grow the backoff each.
    if (again && prev) return;
    const failures = (prev?.failures ?? 0) + 1;
    const delay = probeDelay(this.o.probe, failures, e, this.o.random);
    const o: Outage = {
      cause: outageCause(e),
      sinceMs: prev?.sinceMs ?? t,
      failures,
      nextProbeMs: t + delay,
      error: e instanceof Error ? e.message : String(e),
    };
    this.outages.set(r.id, o);
    await this.o.store.setOutage(r.id, o);
    const fields = { replica: r.id, member: r.member, cause: o.cause, doing, retryInMs: delay, err: e };
    if (!prev) this.o.log.warn(fields, 'replica unavailable: what is pending for it waits in its outage log');
    else this.o.log.debug(fields, 'replica still unavailable');
  }

  /** A probe of an unavailable replica went through: its outage log replays (in order). */
  private async recovered(id: string): Promise<void> {
    const o = this.outages.get(id);
    if (!o) return;
    this.outages.delete(id);
    await this.o.store.setOutage(id, undefined);
    const waiting = await this.o.store.pendingFor(id);
    this.o.log.info(
      { replica: id, cause: o.cause, downMs: this.o.now() - o.sinceMs, waiting },
      'replica available again: its outage log is replayed in order',
    );
  }

  /** Every replica's state; `loaded`: from memory, else from the store (before the first round). */
  status(replicas: readonly Replica[], loaded: boolean): Promise<ReplicaStatus[]> {
    return Promise.all(
      replicas.map(async (r): Promise<ReplicaStatus> => {
        const o = loaded ? this.outages.get(r.id) : await this.o.store.outage(r.id);
        const waiting = await this.o.store.pendingFor(r.id);
        if (!o) return { id: r.id, member: r.member, state: 'available', waiting };
        return {
          id: r.id,
          member: r.member,
          state: 'unavailable',
          cause: o.cause,
          sinceMs: o.sinceMs,
          nextProbeMs: o.nextProbeMs,
          error: o.error,
          waiting,
        };
      }),
    );
  }
}
