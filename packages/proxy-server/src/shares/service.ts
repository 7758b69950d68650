/**
 * Cross-cloud shared folders served by the proxy (DESIGN §5): connected provider accounts
 * (tokens encrypted at rest in the mirror's CredentialVault), shares, invitations and
 * members (the mirror's ShareRegistry), and one running MirrorEngine per share with at
 * least two members. A member who keeps the share in Weft storage has the user's own
 * namespace in this proxy's store as replica (NamespaceProvider), so the mirror's writes
 * appear in that namespace's change feed and the member's Weft clients hear about them.
 *
 * Everything is confined to the caller: accounts are the caller's own, a share is seen and
 * changed only by its members, and only the owner removes members.
 */
import * as nodePath from 'node:path';
import type Database from 'better-sqlite3';
import type { Logger } from 'pino';
import {
  type MirrorBooks,
  MirrorEngine,
  type MirrorStats,
  type ReplicaConfig,
  ShareError,
  type ShareMember,
  SqliteMirrorBooks,
  VaultError,
  type VaultKeys,
  openDatabase,
  zeroMirrorStats,
} from '@weft/mirror';
import { WRAP_DEFAULTS, type WrapConfig, isProviderError } from '@weft/providers';
import {
  type CloudKind,
  type ConnectAccountRequest,
  type ProviderAccount,
  type ProviderKind,
  type ReplicaAvailability,
  type ReplicaChoice,
  SHARE_LINK_PREFIX,
  type ShareInfo,
  type ShareInvitePreview,
  type ShareInviteResponse,
  type ShareMemberInfo,
  type ShareSyncStatus,
} from '@weft/wire';
import type { SharesConfig } from '../config.ts';
import { ApiError } from '../errors.ts';
import type { OpScheduler } from '../scheduler.ts';
import type { HybridStore } from '../store/hybrid.ts';
import type { ProviderRoute } from '../peer-routing.ts';
import { privateDatabaseFile } from '../private-files.ts';
import { keysFrom, ProviderAccounts } from './accounts.ts';
import { ReplicaOverlapError, type ShareBook, SqliteShareBook } from './book.ts';
import { NamespaceProvider } from './namespace-provider.ts';

/** Device ids of the mirror's writes into namespaces start with this. */
export const MIRROR_DEVICE_PREFIX = 'mirror:';

export interface ShareServiceOptions {
  readonly config: SharesConfig;
  readonly dataDir: string;
  readonly store: HybridStore;
  readonly scheduler: OpScheduler;
  readonly log: Logger;
  /** Resolves when `user`'s namespace records a change after `seq`. */
  readonly waitForSeq: (user: string, seq: number, signal: AbortSignal) => Promise<void>;
  /** Wrapper configuration per cloud (tests shorten Retry-After sleeps). Default WRAP_DEFAULTS. */
  readonly wrap?: (cloud: ProviderKind | 'weft') => WrapConfig;
  /**
   * The shares registry (book.ts), given the vault's keys. Default: SQLite, on the mirror's
   * database. With a shared one (PostgreSQL) the engines follow changes other instances make.
   */
  readonly openBook?: (keys: VaultKeys) => ShareBook;
  /**
   * The mirror engines' books. Default: SQLite, on the mirror's database (mirror.sqlite).
   * With shared ones (PostgreSQL, writes fenced by the controller lease) any instance can
   * take the engines over; `close` is called when the service closes.
   */
  readonly books?: MirrorBooks & { close?(): Promise<void> };
  /** How often engines are matched to a shared registry's shares and members. Default 2 s. */
  readonly resyncMs?: number;
  /** Whether `start()` runs the engines here (default true); `setEngines` switches it later. */
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

const WEFT_ACCOUNT = 'weft:';

/** ShareError / VaultError → the API's errors. */
function apiError(e: unknown): unknown {
  if (e instanceof ShareError) {
    switch (e.code) {
      case 'NotFound':
        return new ApiError('NOT_FOUND', e.message);
      case 'Forbidden':
        return new ApiError('FORBIDDEN', e.message);
      case 'InvalidInvite':
        return new ApiError('NOT_FOUND', e.message);
      case 'InviteExpired':
        return new ApiError('INVITE_EXPIRED', e.message);
      case 'AlreadyMember':
        return new ApiError('ALREADY_EXISTS', e.message);
      case 'InvalidArgument':
        return new ApiError('BAD_REQUEST', e.message);
    }
  }
  if (e instanceof VaultError) return new ApiError('INTERNAL', 'stored credentials cannot be read');
  if (e instanceof ReplicaOverlapError) return new ApiError('ALREADY_EXISTS', e.message);
  return e;
}

/** What an engine was started for: its members' replicas (a change restarts it). */
function membersKey(members: readonly ShareMember[]): string {
  return JSON.stringify(members.map((m) => [m.member, m.provider, m.accountId, m.root]));
}

export class ShareService {
  /** The mirror's SQLite database, when the books or the registry are there (the default). */
  private readonly db: Database.Database | undefined;
  /** The mirror engines' books (SQLite by default; PostgreSQL in a cluster). */
  private readonly books: MirrorBooks & { close?(): Promise<void> };
  private readonly registry: ShareBook;
  private readonly accountBook: ProviderAccounts;
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

  constructor(private readonly o: ShareServiceOptions) {
    const keys = keysFrom(o.config, o.dataDir);
    if (!o.openBook || !o.books) {
      const mirrorFile = o.config.mirrorFile ?? nodePath.join(o.dataDir, 'mirror.sqlite');
      privateDatabaseFile(mirrorFile);
      this.db = openDatabase(mirrorFile);
      this.db.pragma('foreign_keys = ON');
    }
    const db = this.db;
    this.registry = o.openBook?.(keys) ?? new SqliteShareBook(db!, keys);
    this.books = o.books ?? new SqliteMirrorBooks(db!);
    this.accountBook = new ProviderAccounts(this.registry, o.config);
    this.engines = o.engines ?? true;
  }

  /** Start the engines of the shares already stored (when this instance runs them). */
  async start(): Promise<void> {
    if (!this.engines) return;
    for (const s of await this.registry.all()) await this.restart(s.id);
    if (this.registry.shared && !this.resyncTimer) {
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
    for (const s of await this.registry.all()) {
      seen.add(s.id);
      if (this.started.get(s.id) !== membersKey(await this.registry.members(s.id))) await this.restart(s.id);
    }
    for (const id of this.started.keys()) if (!seen.has(id)) await this.restart(id);
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.resyncTimer) clearInterval(this.resyncTimer);
    await this.resyncing;
    await Promise.allSettled([...this.chains.values()]);
    await Promise.allSettled([...this.running.values()].map((r) => r.engine.stop()));
    this.running.clear();
    await this.registry.close();
    await this.books.close?.();
    this.db?.close();
  }

  // ---------------------------------------------------------------- accounts (accounts.ts)

  accounts(user: string): Promise<ProviderAccount[]> {
    return this.accountBook.list(user);
  }

  connectAccount(user: string, req: ConnectAccountRequest): Promise<ProviderAccount> {
    return this.accountBook.connect(user, req);
  }

  disconnectAccount(user: string, id: string): Promise<void> {
    return this.accountBook.disconnect(user, id);
  }

  private async guard<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (e) {
      throw apiError(e);
    }
  }

  // ---------------------------------------------------------------- shares

  /** Check a replica choice for `user` and make sure its folder exists (or create it). */
  private async replicaSpec(
    user: string,
    choice: ReplicaChoice,
    create: boolean,
  ): Promise<{ provider: string; accountId: string; root: string }> {
    if (choice.cloud === 'weft') {
      const e = await this.o.store.stat(user, choice.root);
      if (e && e.kind !== 'dir') throw new ApiError('NOT_A_FOLDER', `${choice.root} is a file`);
      if (!e) {
        if (!create) throw new ApiError('NOT_FOUND', `no folder ${choice.root} in your Weft storage`);
        await this.weftProvider(user, 'setup').mkdir(choice.root);
      }
      return { provider: 'weft', accountId: WEFT_ACCOUNT + user, root: choice.root };
    }
    const row = await this.accountBook.own(user, choice.accountId);
    const { provider } = await this.guard(() => this.accountBook.provider(row.account_id));
    try {
      const st = await provider.stat(choice.root).catch(async (e: unknown) => {
        if (!create || !isProviderError(e) || e.code !== 'NotFound') throw e;
        await provider.mkdir(choice.root);
        return provider.stat(choice.root);
      });
      if (st.kind !== 'dir') throw new ApiError('NOT_A_FOLDER', `${choice.root} is a file`);
    } catch (e) {
      if (e instanceof ApiError) throw e;
      if (isProviderError(e) && e.code === 'NotFound')
        throw new ApiError('NOT_FOUND', `no folder ${choice.root} in that account`);
      if (isProviderError(e) && e.code === 'Auth')
        throw new ApiError('FORBIDDEN', `the ${row.provider} account refused its stored credentials`);
      throw e;
    } finally {
      await provider.close?.();
    }
    return { provider: row.provider, accountId: row.account_id, root: choice.root };
  }

  private weftProvider(user: string, shareId: string): NamespaceProvider {
    return new NamespaceProvider({
      store: this.o.store,
      scheduler: this.o.scheduler,
      writer: { userId: user, deviceId: MIRROR_DEVICE_PREFIX + shareId, deviceName: 'shared folder' },
      waitForSeq: (seq, signal) => this.o.waitForSeq(user, seq, signal),
    });
  }

  private async requireMember(user: string, shareId: string): Promise<ShareMember[]> {
    const members = await this.guard(async () => {
      await this.registry.get(shareId);
      return this.registry.members(shareId);
    });
    // Not a member: the share does not exist for this user.
    if (!members.some((m) => m.member === user)) throw new ApiError('NOT_FOUND', `no share ${shareId}`);
    return members;
  }

  async create(user: string, name: string, choice: ReplicaChoice): Promise<ShareInfo> {
    const spec = await this.replicaSpec(user, choice, false);
    // One replica per folder: a folder already mirrored (or inside / around one) is refused.
    const share = await this.guard(() => this.registry.create(name, user, spec));
    await this.restart(share.id);
    return this.info(user, share.id);
  }

  async list(user: string): Promise<ShareInfo[]> {
    return Promise.all((await this.registry.list(user)).map((s) => this.info(user, s.id)));
  }

  async get(user: string, shareId: string): Promise<ShareInfo> {
    await this.requireMember(user, shareId);
    return this.info(user, shareId);
  }

  async invite(user: string, shareId: string, ttlHours: number | undefined): Promise<ShareInviteResponse> {
    await this.requireMember(user, shareId);
    const ttlMs = (ttlHours ?? 7 * 24) * 3600_000;
    const now = Date.now();
    const token = await this.guard(() => this.registry.invite(shareId, user, ttlMs));
    return { shareId, token, link: SHARE_LINK_PREFIX + token, expiresMs: now + ttlMs };
  }

  async preview(token: string): Promise<ShareInvitePreview> {
    const p = await this.guard(() => this.registry.preview(token));
    return {
      shareId: p.share.id,
      name: p.share.name,
      owner: p.share.owner,
      invitedBy: p.invitedBy,
      expiresMs: p.expiresMs,
      members: (await this.registry.members(p.share.id)).map((m) => ({
        member: m.member,
        cloud: this.cloud(m),
      })),
    };
  }

  async accept(user: string, token: string, choice: ReplicaChoice): Promise<ShareInfo> {
    const p = await this.guard(() => this.registry.preview(token));
    if ((await this.registry.members(p.share.id)).some((m) => m.member === user))
      throw new ApiError('ALREADY_EXISTS', `${user} is already a member`);
    const spec = await this.replicaSpec(user, choice, true);
    const m = await this.guard(() => this.registry.accept(token, user, spec));
    this.joining.set(m.shareId, { member: user, applied: 0, done: false });
    await this.restart(m.shareId);
    return this.info(user, m.shareId);
  }

  async leave(user: string, shareId: string): Promise<void> {
    await this.requireMember(user, shareId);
    await this.guard(() => this.registry.leave(shareId, user));
    await this.restart(shareId);
  }

  async remove(user: string, shareId: string, member: string): Promise<void> {
    await this.requireMember(user, shareId);
    await this.guard(() => this.registry.remove(shareId, user, member));
    await this.restart(shareId);
  }

  // ---------------------------------------------------------------- engines

  /** Set by the server when a peer link routes writes (peer-routing.ts); read when an engine starts. */
  providerRoute: ProviderRoute | undefined;

  private cloud(m: ShareMember): CloudKind {
    return m.provider as CloudKind;
  }

  private async replicaOf(shareId: string, m: ShareMember): Promise<ReplicaConfig> {
    const id = `${m.member}@${m.accountId}`;
    if (m.provider === 'weft') {
      const p = this.weftProvider(m.member, shareId);
      return {
        id,
        member: m.member,
        provider: p,
        root: m.root,
        wrap: this.o.wrap?.('weft') ?? { retry: { maxAttempts: 3 } },
        waitForChanges: (cursor, signal) => p.waitForChanges(cursor, signal),
      };
    }
    const made = await this.accountBook.provider(m.accountId);
    // Inter-proxy routing (peer-routing.ts): file writes to a cloud a peer serves go through it.
    const provider =
      this.providerRoute?.({
        shareId,
        replicaId: id,
        kind: made.kind,
        accountId: m.accountId,
        provider: made.provider,
        tokens: () => this.accountBook.tokens(m.accountId),
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
      const members = await this.registry.members(shareId);
      if (members.length < 2) return;
      const engine = new MirrorEngine({
        shareId,
        books: this.books,
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
    const rows = await this.books.share(shareId).logRecords();
    return rows.filter((r) => paths.some((p) => r.op.includes(JSON.stringify(p).slice(1, -1))));
  }

  /** Stop the share's running engine, if any, keeping its totals. */
  private async stopRunning(shareId: string): Promise<void> {
    const old = this.running.get(shareId);
    this.running.delete(shareId);
    if (old) {
      await old.engine.stop();
      this.addTotals(shareId, old.engine);
    }
  }

  /** Stop the share's engine (if any) and start one for its current members (two or more). */
  restart(shareId: string): Promise<void> {
    const prev = this.chains.get(shareId) ?? Promise.resolve();
    const next = prev.then(async () => {
      await this.stopRunning(shareId);
      if (this.closed || !this.engines) {
        this.started.delete(shareId);
        return;
      }
      let members: ShareMember[];
      try {
        await this.registry.get(shareId);
        members = await this.registry.members(shareId);
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
        books: this.books,
        logger: this.o.log,
        pollIntervalMs: this.o.config.pollIntervalMs,
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

  private async status(shareId: string): Promise<{
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
  private async availability(shareId: string, m: ShareMember, own: boolean): Promise<ReplicaAvailability> {
    const id = `${m.member}@${m.accountId}`;
    const r = this.running.get(shareId);
    const s = r?.engine.ready ? (await r.engine.replicaStatus()).find((x) => x.id === id) : undefined;
    const store = this.books.share(shareId);
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

  private async info(user: string, shareId: string): Promise<ShareInfo> {
    const share = await this.guard(() => this.registry.get(shareId));
    const members = await this.registry.members(shareId);
    const { status, seeding } = await this.status(shareId);
    const labels = new Map<string, string>();
    for (const m of members)
      if (m.member === user && m.provider !== 'weft') {
        const row = await this.registry.account(m.accountId);
        if (row) labels.set(m.accountId, row.label);
      }
    const out: ShareMemberInfo[] = [];
    for (const m of members) {
      const own = m.member === user;
      const label = own ? labels.get(m.accountId) : undefined;
      out.push({
        member: m.member,
        role: m.role,
        cloud: this.cloud(m),
        ...(label !== undefined ? { accountLabel: label } : {}),
        ...(own ? { root: m.root } : {}),
        joinedMs: m.joinedMs,
        ...(seeding && seeding.member === m.member
          ? { seeding: { applied: seeding.applied, total: seeding.total, done: seeding.done } }
          : {}),
        replica: await this.availability(shareId, m, own),
      });
    }
    return {
      id: share.id,
      name: share.name,
      owner: share.owner,
      createdMs: share.createdMs,
      role: share.owner === user ? 'owner' : 'member',
      members: out,
      status,
    };
  }
}
