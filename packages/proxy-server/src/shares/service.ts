/**
 * Cross-cloud shared folders served by the proxy (DESIGN §5): connected provider accounts
 * (tokens encrypted at rest in the mirror's CredentialVault), shares, invitations and
 * members (the mirror's ShareRegistry), and one running MirrorEngine per share with at
 * least two members (engines.ts). A member who keeps the share in Weft storage has the user's own
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
  type MirrorStats,
  ShareError,
  type ShareMember,
  SqliteMirrorBooks,
  VaultError,
  type VaultKeys,
  openDatabase,
} from '@weft/mirror';
import { type WrapConfig, isProviderError } from '@weft/providers';
import {
  type CloudKind,
  type ConnectAccountRequest,
  type ProviderAccount,
  type ProviderKind,
  type ReplicaChoice,
  SHARE_LINK_PREFIX,
  type ShareInfo,
  type ShareInvitePreview,
  type ShareInviteResponse,
  type ShareMemberInfo,
} from '@weft/wire';
import type { SharesConfig } from '../config.ts';
import { ApiError } from '../errors.ts';
import type { OpScheduler } from '../scheduler.ts';
import type { HybridStore } from '../store/hybrid.ts';
import type { ProviderRoute } from '../peer-routing.ts';
import { privateDatabaseFile } from '../private-files.ts';
import { keysFrom, ProviderAccounts } from './accounts.ts';
import { ReplicaOverlapError, type ShareBook, SqliteShareBook } from './book.ts';
import { ShareEngines } from './engines.ts';
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

export class ShareService {
  /** The mirror's SQLite database, when the books or the registry are there (the default). */
  private readonly db: Database.Database | undefined;
  /** The mirror engines' books (SQLite by default; PostgreSQL in a cluster). */
  private readonly books: MirrorBooks & { close?(): Promise<void> };
  private readonly registry: ShareBook;
  private readonly accountBook: ProviderAccounts;
  /** The mirror engines (engines.ts). */
  private readonly engineSet: ShareEngines;

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
    this.engineSet = new ShareEngines({
      config: o.config,
      log: o.log,
      registry: this.registry,
      accountBook: this.accountBook,
      books: this.books,
      weftProvider: (user, shareId) => this.weftProvider(user, shareId),
      ...(o.wrap ? { wrap: o.wrap } : {}),
      ...(o.resyncMs !== undefined ? { resyncMs: o.resyncMs } : {}),
      ...(o.engines !== undefined ? { engines: o.engines } : {}),
    });
  }

  /** Start the engines of the shares already stored (when this instance runs them). */
  start(): Promise<void> {
    return this.engineSet.start();
  }

  /** Run the mirror engines here or not (in a cluster only the controller runs them). */
  setEngines(on: boolean): Promise<void> {
    return this.engineSet.setEngines(on);
  }

  /** Start, restart or stop engines whose share's members changed (through any instance). */
  resync(): Promise<void> {
    return this.engineSet.resync();
  }

  /** Everything the share's engines did since this proxy started (tests, reports). */
  stats(shareId: string): MirrorStats {
    return this.engineSet.stats(shareId);
  }

  /** Run the share's mirror until quiescent, then keep it running (ShareEngines.quiesce). */
  quiesce(shareId: string, maxRounds?: number): Promise<void> {
    return this.engineSet.quiesce(shareId, maxRounds);
  }

  /** The share's log entries whose op mentions one of `paths` (diagnosis of a divergence). */
  logEntries(shareId: string, paths: readonly string[]): Promise<unknown[]> {
    return this.engineSet.logEntries(shareId, paths);
  }

  /** Set by the server when a peer link routes writes (peer-routing.ts); read when an engine starts. */
  get providerRoute(): ProviderRoute | undefined {
    return this.engineSet.providerRoute;
  }
  set providerRoute(route: ProviderRoute | undefined) {
    this.engineSet.providerRoute = route;
  }

  private restart(shareId: string): Promise<void> {
    return this.engineSet.restart(shareId);
  }

  async close(): Promise<void> {
    await this.engineSet.close();
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
    this.engineSet.joined(m.shareId, user);
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

  // ---------------------------------------------------------------- status

  private cloud(m: ShareMember): CloudKind {
    return m.provider as CloudKind;
  }

  private async info(user: string, shareId: string): Promise<ShareInfo> {
    const share = await this.guard(() => this.registry.get(shareId));
    const members = await this.registry.members(shareId);
    const { status, seeding } = await this.engineSet.status(shareId);
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
        replica: await this.engineSet.availability(shareId, m, own),
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
