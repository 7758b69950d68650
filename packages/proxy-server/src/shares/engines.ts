/**
 * The shares' mirror engines in the proxy (split from service.ts): one running MirrorEngine
 * per share with at least two members, restarted when its members change (through this
 * instance or, with a shared registry, any), run only where `setEngines(true)` says (in a
 * cluster, on the controller), their statistics kept across restarts, and each share's sync
 * status and replicas' availability read from the engine or, when it does not run here,
 * from the books (the same on every instance when the books are on PostgreSQL).
 */
import type { Logger } from 'pino';
import {
  type MirrorBooks,
  MirrorEngine,
  type MirrorStats,
  type ReplicaConfig,
  ShareError,
  type ShareMember,
  zeroMirrorStats,
} from '@weft/mirror';
import { WRAP_DEFAULTS, type WrapConfig } from '@weft/providers';
import type { ProviderKind, ReplicaAvailability, ShareSyncStatus } from '@weft/wire';
import type { SharesConfig } from '../config.ts';
import type { ProviderRoute } from '../peer-routing.ts';
import type { ProviderAccounts } from './accounts.ts';
import type { ShareBook } from './book.ts';
import type { NamespaceProvider } from './namespace-provider.ts';

export interface ShareEnginesOptions {
  readonly config: SharesConfig;
  readonly log: Logger;
  readonly registry: ShareBook;
  readonly accountBook: ProviderAccounts;
  readonly books: MirrorBooks;
  /** A member's Weft storage as a replica (the user's namespace in this proxy). */
  readonly weftProvider: (user: string, shareId: string) => NamespaceProvider;
  readonly wrap?: (cloud: ProviderKind | 'weft') => WrapConfig;
  readonly resyncMs?: number;
  /** Whether `start()` runs the engines here (default true). */
  readonly engines?: boolean;
}

interface Running {
  readonly engine: MirrorEngine;
  applied: number;
  lastApplied: number;
  pending: number;
  lastRoundMs?: number;
  lastError?: string;
}

interface Joining {
  readonly member: string;
  applied: number;
  /** Entries to apply, known after the joined engine's first round. */
  total?: number;
  done: boolean;
}

/** What an engine was started for: its members' replicas (a change restarts it). */
function membersKey(members: readonly ShareMember[]): string {
  return JSON.stringify(members.map((m) => [m.member, m.provider, m.accountId, m.root]));
}

export class ShareEngines {
  /** Whether this instance runs the engines (in a cluster, the controller only). */
  private engines: boolean;
  /** setEngines calls, one after another. */
  private switching: Promise<void> = Promise.resolve();
  /** Per share: the members its engine was last started for. */
  private readonly started = new Map<string, string>();
  private resyncTimer: NodeJS.Timeout | undefined;
  private resyncing: Promise<void> | undefined;
  private readonly running = new Map<string, Running>();
  private readonly joining = new Map<string, Joining>();
  /** Per share: engine restarts run one after another. */
  private readonly chains = new Map<string, Promise<void>>();
  /** Per share: statistics of the engines stopped so far (restarts, membership changes). */
  private readonly totals = new Map<string, MirrorStats>();
  private closed = false;

  /** Set by the server when a peer link routes writes (peer-routing.ts); read when an engine starts. */
  providerRoute: ProviderRoute | undefined;

  constructor(private readonly o: ShareEnginesOptions) {
    this.engines = o.engines ?? true;
  }

  /** `member` joined `shareId`: its seeding progress is reported (status()). */
  joined(shareId: string, member: string): void {
    this.joining.set(shareId, { member, applied: 0, done: false });
  }

  /** Stop every engine (its books kept) and run none again. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.resyncTimer) clearInterval(this.resyncTimer);
    await this.resyncing;
    await Promise.allSettled([...this.chains.values()]);
    await Promise.allSettled([...this.running.values()].map((r) => r.engine.stop()));
    this.running.clear();
  }

  /** Start the engines of the shares already stored (when this instance runs them). */
  async start(): Promise<void> {
    if (!this.engines) return;
    // Engines started here take over books a previous controller (or this process before
    // a crash) may have left half-done: each verifies once its backlog is drained.
    for (const s of await this.o.registry.all()) await this.restart(s.id, true);
    if (this.o.registry.shared && !this.resyncTimer) {
      // Shares made, joined or left through another instance: matched here on a period.
      this.resyncTimer = setInterval(() => {
        this.resyncing ??= this.resync()
          .catch((err: unknown) => this.o.log.warn({ err }, 'share engines: resync failed'))
          .finally(() => (this.resyncing = undefined));
      }, this.o.resyncMs ?? 2000);
      this.resyncTimer.unref();
    }
  }

  /**
   * Run the mirror engines here or not (in a cluster only the controller runs them: helper
   * C's lease calls this when the role changes). Off: every engine stops, its books kept.
   */
  setEngines(on: boolean): Promise<void> {
    const next = this.switching.then(async () => {
      if (this.engines === on) return;
      this.engines = on;
      if (on) return this.start();
      if (this.resyncTimer) clearInterval(this.resyncTimer);
      this.resyncTimer = undefined;
      await this.resyncing;
      await Promise.all(
        [...new Set([...this.running.keys(), ...this.started.keys()])].map((id) => this.restart(id)),
      );
    });
    this.switching = next.catch(() => undefined);
    return next;
  }

  /** Start, restart or stop engines whose share's members changed (through any instance). */
  async resync(): Promise<void> {
    if (!this.engines || this.closed) return;
    const seen = new Set<string>();
    for (const s of await this.o.registry.all()) {
      seen.add(s.id);
      if (this.started.get(s.id) !== membersKey(await this.o.registry.members(s.id)))
        await this.restart(s.id);
    }
    for (const id of this.started.keys()) if (!seen.has(id)) await this.restart(id);
  }

  private async replicaOf(shareId: string, m: ShareMember): Promise<ReplicaConfig> {
    const id = `${m.member}@${m.accountId}`;
    if (m.provider === 'weft') {
      const p = this.o.weftProvider(m.member, shareId);
      return {
        id,
        member: m.member,
        provider: p,
        root: m.root,
        wrap: this.o.wrap?.('weft') ?? { retry: { maxAttempts: 3 } },
        waitForChanges: (cursor, signal) => p.waitForChanges(cursor, signal),
      };
    }
    const made = await this.o.accountBook.provider(m.accountId);
    // Inter-proxy routing (peer-routing.ts): file writes to a cloud a peer serves go through it.
    const provider =
      this.providerRoute?.({
        shareId,
        replicaId: id,
        kind: made.kind,
        accountId: m.accountId,
        provider: made.provider,
        tokens: () => this.o.accountBook.tokens(m.accountId),
      }) ?? made.provider;
    return {
      id,
      member: m.member,
      provider,
      root: m.root,
      wrap: this.o.wrap?.(made.kind) ?? WRAP_DEFAULTS[made.kind] ?? {},
      ...(made.waiter ? { waitForChanges: made.waiter } : {}),
      // Drive changes and Graph delta name removed items by id; a new client's id index is
      // empty, so a new engine re-lists these replicas once instead of resuming blind.
      ...(made.kind === 'gdrive' || made.kind === 'onedrive' ? { relistOnStart: true } : {}),
    };
  }

  private addTotals(shareId: string, e: MirrorEngine): void {
    const t = this.totals.get(shareId) ?? { ...e.stats };
    if (this.totals.has(shareId)) {
      for (const k of Object.keys(t) as (keyof MirrorStats)[]) t[k] += e.stats[k];
    }
    this.totals.set(shareId, t);
  }

  /** Everything the share's engines did since this proxy started (tests, reports). */
  stats(shareId: string): MirrorStats {
    const t = { ...(this.totals.get(shareId) ?? zeroMirrorStats()) };
    const r = this.running.get(shareId);
    if (r) for (const k of Object.keys(t) as (keyof MirrorStats)[]) t[k] += r.engine.stats[k];
    return t;
  }

  /**
   * Run the share's mirror until a round finds nothing new and nothing pending (every
   * replica holds the same tree as far as their feeds tell), then keep it running.
   */
  quiesce(shareId: string, maxRounds = 200): Promise<void> {
    const prev = this.chains.get(shareId) ?? Promise.resolve();
    const next = prev.then(async () => {
      await this.stopRunning(shareId);
      const members = await this.o.registry.members(shareId);
      if (members.length < 2) return;
      const engine = new MirrorEngine({
        shareId,
        books: this.o.books,
        logger: this.o.log,
        replicas: await Promise.all(members.map((m) => this.replicaOf(shareId, m))),
      });
      try {
        await engine.quiesce(maxRounds);
        this.o.log.debug({ share: shareId }, 'share quiescent');
        const j = this.joining.get(shareId);
        if (j) {
          j.total ??= engine.initialBacklog ?? 0;
          j.applied = j.total;
          j.done = true;
        }
      } finally {
        this.addTotals(shareId, engine);
      }
    });
    this.chains.set(
      shareId,
      next.catch(() => undefined),
    );
    return next.then(() => this.restart(shareId));
  }

  /** The share's log entries whose op mentions one of `paths` (diagnosis of a divergence). */
  async logEntries(shareId: string, paths: readonly string[]): Promise<unknown[]> {
    const rows = await this.o.books.share(shareId).logRecords();
    return rows.filter((r) => paths.some((p) => r.op.includes(JSON.stringify(p).slice(1, -1))));
  }

  /**
   * Stop the share's running engine, if any, keeping its totals. Returns whether its
   * takeover verification was still due (the next engine inherits it).
   */
  private async stopRunning(shareId: string): Promise<boolean> {
    const old = this.running.get(shareId);
    this.running.delete(shareId);
    if (!old) return false;
    await old.engine.stop();
    this.addTotals(shareId, old.engine);
    return old.engine.startVerificationDue;
  }

  /**
   * Stop the share's engine (if any) and start one for its current members (two or more);
   * `verifyAtStart`: a takeover (MirrorEngineOptions.verifyAtStart).
   */
  restart(shareId: string, verifyAtStart = false): Promise<void> {
    const prev = this.chains.get(shareId) ?? Promise.resolve();
    const next = prev.then(async () => {
      const due = await this.stopRunning(shareId);
      if (this.closed || !this.engines) {
        this.started.delete(shareId);
        return;
      }
      let members: ShareMember[];
      try {
        await this.o.registry.get(shareId);
        members = await this.o.registry.members(shareId);
      } catch (e) {
        if (!(e instanceof ShareError)) throw e;
        this.started.delete(shareId);
        return; // the share is gone (its last member left)
      }
      this.started.set(shareId, membersKey(members));
      if (members.length < 2) return;
      const state: Partial<Running> & { applied: number; lastApplied: number; pending: number } = {
        applied: 0,
        lastApplied: 0,
        pending: 0,
      };
      const engine = new MirrorEngine({
        shareId,
        books: this.o.books,
        logger: this.o.log,
        pollIntervalMs: this.o.config.pollIntervalMs,
        verifyAtStart: verifyAtStart || due,
        ...(this.o.config.probeBackoffMs ? { probeBackoffMs: this.o.config.probeBackoffMs } : {}),
        replicas: await Promise.all(members.map((m) => this.replicaOf(shareId, m))),
        onProgress: ({ applied }) => {
          const delta = applied >= state.lastApplied ? applied - state.lastApplied : applied;
          state.lastApplied = applied;
          state.applied += delta;
          const j = this.joining.get(shareId);
          if (j) j.applied += delta;
        },
        onRound: ({ pending, error }) => {
          state.pending = pending;
          state.lastRoundMs = Date.now();
          state.lastApplied = 0;
          if (error) state.lastError = error instanceof Error ? error.message : String(error);
          else delete state.lastError;
        },
      });
      const running: Running = Object.assign(state, { engine });
      this.running.set(shareId, running);
      engine.start();
    });
    const settled = next.catch((e: unknown) =>
      this.o.log.error({ err: e, share: shareId }, 'mirror start failed'),
    );
    this.chains.set(shareId, settled);
    return settled;
  }

  async status(shareId: string): Promise<{
    status: ShareSyncStatus;
    seeding?: { member: string; applied: number; total: number; done: boolean };
  }> {
    const r = this.running.get(shareId);
    if (!r) return { status: { state: 'idle', pending: 0, applied: 0, conflicts: 0 } };
    const pending = r.engine.ready ? await r.engine.pendingCount() : r.pending;
    const j = this.joining.get(shareId);
    let seeding: { member: string; applied: number; total: number; done: boolean } | undefined;
    if (j) {
      if (!j.done && r.engine.initialBacklog !== undefined) {
        j.total ??= r.engine.initialBacklog;
        if (j.applied >= j.total || pending === 0) j.done = true;
      }
      const total = j.total ?? 0;
      seeding = {
        member: j.member,
        applied: j.done ? total : Math.min(j.applied, total),
        total,
        done: j.done,
      };
    }
    const state: ShareSyncStatus['state'] = r.lastError
      ? 'error'
      : seeding && !seeding.done
        ? 'seeding'
        : pending > 0 || !r.engine.ready
          ? 'syncing'
          : 'idle';
    return {
      status: {
        state,
        pending,
        applied: r.applied,
        conflicts: r.engine.stats.conflicts,
        ...(r.lastRoundMs !== undefined ? { lastRoundMs: r.lastRoundMs } : {}),
        ...(r.lastError !== undefined ? { lastError: r.lastError } : {}),
      },
      ...(seeding ? { seeding } : {}),
    };
  }

  /**
   * Whether the mirror can write to member `m`'s replica (persisted by the engine, so the
   * same whether it runs or not). The cloud's error text only to the member themself.
   */
  async availability(shareId: string, m: ShareMember, own: boolean): Promise<ReplicaAvailability> {
    const id = `${m.member}@${m.accountId}`;
    const r = this.running.get(shareId);
    const s = r?.engine.ready ? (await r.engine.replicaStatus()).find((x) => x.id === id) : undefined;
    const store = this.o.books.share(shareId);
    const o = s ? undefined : await store.outage(id);
    const waiting = s ? s.waiting : await store.pendingFor(id);
    const state = s ? s.state : o ? 'unavailable' : 'available';
    const cause = s?.cause ?? o?.cause;
    const sinceMs = s?.sinceMs ?? o?.sinceMs;
    const nextTryMs = s?.nextProbeMs ?? o?.nextProbeMs;
    const error = s?.error ?? o?.error;
    if (state === 'available') return { state, waiting };
    return {
      state,
      waiting,
      ...(cause !== undefined ? { cause } : {}),
      ...(sinceMs !== undefined ? { sinceMs } : {}),
      ...(nextTryMs !== undefined ? { nextTryMs } : {}),
      ...(own && error !== undefined ? { error } : {}),
    };
  }
}
