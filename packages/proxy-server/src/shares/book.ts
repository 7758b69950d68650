/**
 * The shares registry of the proxy — shares, members, invitations and connected cloud
 * accounts (credentials encrypted at rest) — behind one async interface with two
 * implementations: SQLite (the mirror's own ShareRegistry and CredentialVault on mirror.sqlite,
 * the embedded default) and PostgreSQL (book-postgres.ts), which every proxy instance sharing
 * the database reads and writes, so any instance serves the share routes alike.
 *
 * A check and the write it guards are one method (one transaction): a replica folder is refused
 * when it overlaps another share's replica in the same account, in the same transaction that
 * records it; an account is forgotten only while no share keeps its replica there.
 */
import type Database from 'better-sqlite3';
import {
  CredentialVault,
  type ReplicaSpec,
  type Share,
  ShareError,
  type ShareMember,
  ShareRegistry,
  replicaSpec,
  type VaultKeys,
} from '@weft/mirror';

export interface AccountRow {
  account_id: string;
  owner: string;
  provider: string;
  label: string;
  connected_ms: number;
}

/** A replica folder refused: it is, contains or lies inside share `shareId`'s replica there. */
export class ReplicaOverlapError extends Error {
  constructor(readonly shareId: string) {
    super(`that folder overlaps the replica of share ${shareId}`);
  }
}

export interface ShareBook {
  /** Shared by several proxy instances (PostgreSQL). */
  readonly shared: boolean;

  // connected accounts
  account(id: string): Promise<AccountRow | undefined>;
  /** `owner`'s accounts, in the order connected. */
  accounts(owner: string): Promise<AccountRow[]>;
  /** Store (or replace) an account's credentials; a new account also gets its label and time. */
  putAccount(
    id: string,
    owner: string,
    provider: string,
    secret: string,
    connected?: { label: string; connectedMs: number },
  ): Promise<void>;
  /** The decrypted credentials; VaultError when missing, tampered with or keyed unknown. */
  secret(id: string): Promise<{ owner: string; provider: string; secret: string }>;
  /** Forget an account; refused (that share's id returned, nothing changed) while a share keeps its replica there. */
  removeAccount(id: string): Promise<string | undefined>;

  // shares (ShareError as the mirror's ShareRegistry throws them)
  /** Share an existing folder; ReplicaOverlapError when it overlaps another share's replica. */
  create(name: string, owner: string, replica: ReplicaSpec): Promise<Share>;
  get(shareId: string): Promise<Share>;
  members(shareId: string): Promise<ShareMember[]>;
  /** Every share, oldest first. */
  all(): Promise<Share[]>;
  /** The shares `member` belongs to. */
  list(member: string): Promise<Share[]>;
  invite(shareId: string, by: string, ttlMs: number): Promise<string>;
  preview(token: string): Promise<{ share: Share; invitedBy: string; expiresMs: number }>;
  /** Accept an invitation; ReplicaOverlapError when the folder overlaps another share's replica. */
  accept(token: string, member: string, replica: ReplicaSpec): Promise<ShareMember>;
  leave(shareId: string, member: string): Promise<void>;
  remove(shareId: string, by: string, member: string): Promise<void>;
  close(): Promise<void>;
}

/**
 * The share (if any) whose replica in the same account overlaps `root`: the same folder, one
 * inside it or one around it — the account's root ('') is around every folder.
 */
export function overlapping(
  rows: readonly { share_id: string; root: string }[],
  root: string,
): string | undefined {
  for (const r of rows) {
    const a = r.root;
    if (a === root || a === '' || root === '' || a.startsWith(root + '/') || root.startsWith(a + '/'))
      return r.share_id;
  }
  return undefined;
}

/**
 * The registry on the mirror's SQLite database (one process). Each method runs synchronously
 * to its end, so a check and its write are never interleaved with another call.
 */
export class SqliteShareBook implements ShareBook {
  readonly shared = false;
  private readonly registry: ShareRegistry;
  private readonly vault: CredentialVault;

  constructor(
    private readonly db: Database.Database,
    keys: VaultKeys,
    options: { now?: () => number } = {},
  ) {
    this.registry = new ShareRegistry(db, options.now ? { now: options.now } : {});
    this.vault = new CredentialVault(db, keys);
  }

  async account(id: string): Promise<AccountRow | undefined> {
    return this.db
      .prepare(
        'SELECT account_id, owner, provider, label, connected_ms FROM provider_accounts WHERE account_id = ?',
      )
      .get(id) as AccountRow | undefined;
  }

  async accounts(owner: string): Promise<AccountRow[]> {
    return this.db
      .prepare(
        'SELECT account_id, owner, provider, label, connected_ms FROM provider_accounts WHERE owner = ? ' +
          'ORDER BY connected_ms, account_id',
      )
      .all(owner) as AccountRow[];
  }

  async putAccount(
    id: string,
    owner: string,
    provider: string,
    secret: string,
    connected?: { label: string; connectedMs: number },
  ): Promise<void> {
    this.db.transaction(() => {
      this.vault.put(id, owner, provider, secret);
      if (connected)
        this.db
          .prepare('UPDATE provider_accounts SET label = ?, connected_ms = ? WHERE account_id = ?')
          .run(connected.label, connected.connectedMs, id);
    })();
  }

  async secret(id: string): Promise<{ owner: string; provider: string; secret: string }> {
    return this.vault.get(id);
  }

  async removeAccount(id: string): Promise<string | undefined> {
    const used = this.db
      .prepare('SELECT share_id FROM share_members WHERE account_id = ? ORDER BY share_id LIMIT 1')
      .get(id) as { share_id: string } | undefined;
    if (used) return used.share_id;
    this.vault.remove(id);
    return undefined;
  }

  private assertFree(replica: ReplicaSpec): ReplicaSpec {
    const r = replicaSpec(replica);
    const rows = this.db
      .prepare('SELECT share_id, root FROM share_members WHERE account_id = ? ORDER BY share_id')
      .all(r.accountId) as { share_id: string; root: string }[];
    const other = overlapping(rows, r.root);
    if (other !== undefined) throw new ReplicaOverlapError(other);
    return r;
  }

  async create(name: string, owner: string, replica: ReplicaSpec): Promise<Share> {
    replicaSpec(replica);
    if (name.trim() === '') throw new ShareError('a share needs a name', 'InvalidArgument');
    return this.registry.create(name, owner, this.assertFree(replica));
  }

  async get(shareId: string): Promise<Share> {
    return this.registry.get(shareId);
  }

  async members(shareId: string): Promise<ShareMember[]> {
    return this.registry.members(shareId);
  }

  async all(): Promise<Share[]> {
    return this.registry.all();
  }

  async list(member: string): Promise<Share[]> {
    return this.registry.list(member);
  }

  async invite(shareId: string, by: string, ttlMs: number): Promise<string> {
    return this.registry.invite(shareId, by, ttlMs);
  }

  async preview(token: string): Promise<{ share: Share; invitedBy: string; expiresMs: number }> {
    return this.registry.preview(token);
  }

  async accept(token: string, member: string, replica: ReplicaSpec): Promise<ShareMember> {
    // The invitation first, then membership, then the folder (as on PostgreSQL).
    const p = this.registry.preview(token);
    if (this.registry.members(p.share.id).some((m) => m.member === member))
      throw new ShareError(`${member} is already a member`, 'AlreadyMember');
    return this.registry.accept(token, member, this.assertFree(replica));
  }

  async leave(shareId: string, member: string): Promise<void> {
    this.registry.leave(shareId, member);
  }

  async remove(shareId: string, by: string, member: string): Promise<void> {
    this.registry.remove(shareId, by, member);
  }

  async close(): Promise<void> {}
}
