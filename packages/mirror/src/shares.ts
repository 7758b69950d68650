/**
 * Share management: a share is created from a member's existing folder; its owner invites
 * collaborators with single-use tokens (only their SHA-256 is stored); an invitee accepts
 * by choosing their own provider account and folder; members leave, the owner removes
 * members; shares and members are listed. `replicas()` turns a share's members into the
 * mirror engine's replica list (credentials from the vault, providers from a factory).
 */
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import type Database from 'better-sqlite3';
import { normalizePath, type Provider, type WrapConfig } from '@weft/providers';
import type { ReplicaConfig } from './engine.ts';
import type { CredentialVault } from './vault.ts';
import { systemClock } from './clock.ts';
import { MirrorError, type ShareErrorCode } from './errors.ts';

export interface ReplicaSpec {
  /** 'dropbox' | 'gdrive' | 'onedrive' | 'weft' | …: the factory's key. */
  readonly provider: string;
  /** A connected provider account (credentials in the vault). */
  readonly accountId: string;
  /** The folder in that account ('' = the account's root). */
  readonly root: string;
}

export interface Share {
  readonly id: string;
  readonly name: string;
  readonly owner: string;
  readonly createdMs: number;
}

export interface ShareMember extends ReplicaSpec {
  readonly shareId: string;
  readonly member: string;
  readonly role: 'owner' | 'member';
  readonly joinedMs: number;
}

/** A share registry request refused (see ShareErrorCode); nothing was changed. */
export class ShareError extends MirrorError {
  constructor(
    message: string,
    readonly code: ShareErrorCode,
  ) {
    super(message);
  }
}

export interface ShareRegistryOptions {
  readonly now?: () => number;
  /** How long an invitation is valid. Default 7 days. */
  readonly inviteTtlMs?: number;
}

interface MemberRow {
  share_id: string;
  member: string;
  provider: string;
  account_id: string;
  root: string;
  role: 'owner' | 'member';
  joined_ms: number;
}

function sha256(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}

function toMember(r: MemberRow): ShareMember {
  return {
    shareId: r.share_id,
    member: r.member,
    provider: r.provider,
    accountId: r.account_id,
    root: r.root,
    role: r.role,
    joinedMs: r.joined_ms,
  };
}

/**
 * A replica as stored: provider and account required, the folder as people type it
 * ('/Team/Plans/') made a provider path without the slashes. ShareError when incomplete.
 */
export function replicaSpec(s: ReplicaSpec): ReplicaSpec {
  if (!s.provider || !s.accountId)
    throw new ShareError('a replica needs a provider and an account', 'InvalidArgument');
  const root = s.root.replace(/^\/+|\/+$/g, '');
  return { provider: s.provider, accountId: s.accountId, root: root === '' ? '' : normalizePath(root) };
}

/** An invitation token's stored form (the token itself is never stored). */
export function inviteHash(token: string): string {
  return sha256(token);
}

export class ShareRegistry {
  private readonly now: () => number;
  private readonly inviteTtlMs: number;

  constructor(
    private readonly db: Database.Database,
    options: ShareRegistryOptions = {},
  ) {
    this.now = options.now ?? systemClock;
    this.inviteTtlMs = options.inviteTtlMs ?? 7 * 24 * 3600_000;
  }

  /** Share an existing folder: its owner becomes the first member. */
  create(name: string, owner: string, replica: ReplicaSpec): Share {
    const r = replicaSpec(replica);
    if (name.trim() === '') throw new ShareError('a share needs a name', 'InvalidArgument');
    const share: Share = { id: randomUUID(), name: name.trim(), owner, createdMs: this.now() };
    this.db.transaction(() => {
      this.db
        .prepare('INSERT INTO shares (id, name, owner, created_ms) VALUES (?, ?, ?, ?)')
        .run(share.id, share.name, owner, share.createdMs);
      this.db
        .prepare(
          'INSERT INTO share_members (share_id, member, provider, account_id, root, role, joined_ms) ' +
            "VALUES (?, ?, ?, ?, ?, 'owner', ?)",
        )
        .run(share.id, owner, r.provider, r.accountId, r.root, share.createdMs);
    })();
    return share;
  }

  get(shareId: string): Share {
    const row = this.db
      .prepare('SELECT id, name, owner, created_ms FROM shares WHERE id = ?')
      .get(shareId) as { id: string; name: string; owner: string; created_ms: number } | undefined;
    if (!row) throw new ShareError(`no share ${shareId}`, 'NotFound');
    return { id: row.id, name: row.name, owner: row.owner, createdMs: row.created_ms };
  }

  private requireMember(shareId: string, member: string): ShareMember {
    const row = this.db
      .prepare('SELECT * FROM share_members WHERE share_id = ? AND member = ?')
      .get(shareId, member) as MemberRow | undefined;
    if (!row) throw new ShareError(`${member} is not a member of ${shareId}`, 'Forbidden');
    return toMember(row);
  }

  /** An invitation token (to send as a link); any member may invite. Single use. */
  invite(shareId: string, by: string, ttlMs = this.inviteTtlMs): string {
    this.get(shareId);
    this.requireMember(shareId, by);
    const token = randomBytes(32).toString('base64url');
    this.db
      .prepare(
        'INSERT INTO share_invites (token_sha256, share_id, invited_by, expires_ms) VALUES (?, ?, ?, ?)',
      )
      .run(sha256(token), shareId, by, this.now() + ttlMs);
    return token;
  }

  /** What an unused, unexpired invitation leads to (without using it). */
  preview(token: string): { share: Share; invitedBy: string; expiresMs: number } {
    const inv = this.db
      .prepare('SELECT share_id, invited_by, expires_ms, used_by FROM share_invites WHERE token_sha256 = ?')
      .get(sha256(token)) as
      { share_id: string; invited_by: string; expires_ms: number; used_by: string | null } | undefined;
    if (!inv || inv.used_by !== null)
      throw new ShareError('the invitation is unknown or used', 'InvalidInvite');
    if (inv.expires_ms < this.now()) throw new ShareError('the invitation has expired', 'InviteExpired');
    return { share: this.get(inv.share_id), invitedBy: inv.invited_by, expiresMs: inv.expires_ms };
  }

  /** Accept an invitation, choosing one's own provider account and folder. */
  accept(token: string, member: string, replica: ReplicaSpec): ShareMember {
    const r = replicaSpec(replica);
    return this.db.transaction(() => {
      const inv = this.db
        .prepare('SELECT share_id, expires_ms, used_by FROM share_invites WHERE token_sha256 = ?')
        .get(sha256(token)) as { share_id: string; expires_ms: number; used_by: string | null } | undefined;
      if (!inv || inv.used_by !== null)
        throw new ShareError('the invitation is unknown or used', 'InvalidInvite');
      if (inv.expires_ms < this.now()) throw new ShareError('the invitation has expired', 'InviteExpired');
      const existing = this.db
        .prepare('SELECT 1 FROM share_members WHERE share_id = ? AND member = ?')
        .get(inv.share_id, member);
      if (existing) throw new ShareError(`${member} is already a member`, 'AlreadyMember');
      const joined = this.now();
      this.db
        .prepare('UPDATE share_invites SET used_by = ? WHERE token_sha256 = ?')
        .run(member, sha256(token));
      this.db
        .prepare(
          'INSERT INTO share_members (share_id, member, provider, account_id, root, role, joined_ms) ' +
            "VALUES (?, ?, ?, ?, ?, 'member', ?)",
        )
        .run(inv.share_id, member, r.provider, r.accountId, r.root, joined);
      return { shareId: inv.share_id, member, ...r, role: 'member' as const, joinedMs: joined };
    })();
  }

  /** Leave a share. The owner cannot leave while others remain (remove them, or delete). */
  leave(shareId: string, member: string): void {
    const m = this.requireMember(shareId, member);
    const others = this.members(shareId).filter((x) => x.member !== member);
    if (m.role === 'owner' && others.length > 0) {
      throw new ShareError('the owner leaves last; remove the other members first', 'Forbidden');
    }
    this.db.transaction(() => {
      this.db.prepare('DELETE FROM share_members WHERE share_id = ? AND member = ?').run(shareId, member);
      if (others.length === 0) this.db.prepare('DELETE FROM shares WHERE id = ?').run(shareId);
    })();
  }

  /** The owner removes a member (their folder is left as it is; it just stops syncing). */
  remove(shareId: string, by: string, member: string): void {
    const share = this.get(shareId);
    if (share.owner !== by) throw new ShareError('only the owner removes members', 'Forbidden');
    if (member === by) throw new ShareError('the owner leaves instead', 'InvalidArgument');
    this.requireMember(shareId, member);
    this.db.prepare('DELETE FROM share_members WHERE share_id = ? AND member = ?').run(shareId, member);
  }

  members(shareId: string): ShareMember[] {
    const rows = this.db
      .prepare('SELECT * FROM share_members WHERE share_id = ? ORDER BY joined_ms, member')
      .all(shareId) as MemberRow[];
    return rows.map(toMember);
  }

  /** Every share (the proxy starts a mirror engine for each). */
  all(): Share[] {
    const rows = this.db
      .prepare('SELECT id, name, owner, created_ms FROM shares ORDER BY created_ms, id')
      .all() as {
      id: string;
      name: string;
      owner: string;
      created_ms: number;
    }[];
    return rows.map((r) => ({ id: r.id, name: r.name, owner: r.owner, createdMs: r.created_ms }));
  }

  /** The shares `member` belongs to. */
  list(member: string): Share[] {
    const rows = this.db
      .prepare(
        'SELECT s.id, s.name, s.owner, s.created_ms FROM shares s JOIN share_members m ON m.share_id = s.id ' +
          'WHERE m.member = ? ORDER BY s.created_ms, s.id',
      )
      .all(member) as { id: string; name: string; owner: string; created_ms: number }[];
    return rows.map((r) => ({ id: r.id, name: r.name, owner: r.owner, createdMs: r.created_ms }));
  }

  /**
   * The mirror engine's replicas for a share: one per member, its provider made by
   * `factory` from the provider name and the decrypted credentials.
   */
  replicas(
    shareId: string,
    vault: CredentialVault,
    factory: (provider: string, secret: string) => { provider: Provider; wrap?: WrapConfig },
  ): ReplicaConfig[] {
    return this.members(shareId).map((m) => {
      const cred = vault.get(m.accountId);
      const made = factory(m.provider, cred.secret);
      return {
        id: `${m.member}@${m.accountId}`,
        member: m.member,
        provider: made.provider,
        root: m.root,
        ...(made.wrap ? { wrap: made.wrap } : {}),
      };
    });
  }
}
