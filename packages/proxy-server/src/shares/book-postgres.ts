/**
 * The shares registry on PostgreSQL (book.ts), shared by every proxy instance on the database:
 * tables `shares`, `share_members`, `share_invites`, `provider_accounts` (pg-migrations/003),
 * the rows the mirror's SQLite registry holds. What one process got from running each call to
 * its end holds here by transactions:
 *
 * - accept locks the invitation row (SELECT ... FOR UPDATE): two instances accepting one token
 *   at once give one member and one "used";
 * - a replica's overlap check and its insert, and an account's removal and its "still used"
 *   check, run under a transaction advisory lock on the account, so no two shares end up on
 *   overlapping folders of one account and no share keeps a replica on a forgotten account;
 * - leave and remove lock the share row, so the owner never ends up alone-but-not-last.
 *
 * Credentials are sealed by the mirror vault's format (AES-256-GCM, account id as AAD): every
 * instance needs the same key (shares.key).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import {
  inviteHash,
  openSecret,
  type ReplicaSpec,
  replicaSpec,
  sealSecret,
  type Share,
  ShareError,
  type ShareMember,
  VaultError,
  type VaultKeys,
} from '@weft/mirror';
import { connect, inTransaction, type Sql, type Tx } from '../store/postgres-db.ts';
import { type AccountRow, overlapping, ReplicaOverlapError, type ShareBook } from './book.ts';

/** Class id of the share registry's two-key advisory locks ('WS'). */
const ACCOUNT_LOCK_CLASS = 0x5753;

interface ShareSql {
  id: string;
  name: string;
  owner: string;
  created_ms: number;
}

interface MemberSql {
  share_id: string;
  member: string;
  provider: string;
  account_id: string;
  root: string;
  role: 'owner' | 'member';
  joined_ms: number;
}

function toShare(r: ShareSql): Share {
  return { id: r.id, name: r.name, owner: r.owner, createdMs: r.created_ms };
}

function toMember(r: MemberSql): ShareMember {
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

export class PostgresShareBook implements ShareBook {
  readonly shared = true;
  private readonly now: () => number;

  /** On a pool of its own (`open`), or on `sql` (closed by its owner). */
  constructor(
    private readonly sql: Sql,
    private readonly keys: VaultKeys,
    options: { now?: () => number; owned?: boolean } = {},
  ) {
    if (!keys.keys[keys.currentKeyId]) throw new VaultError('the current key id has no key');
    this.now = options.now ?? Date.now;
    this.owned = options.owned ?? false;
  }

  private readonly owned: boolean;

  static open(url: string, keys: VaultKeys, options: { now?: () => number } = {}): PostgresShareBook {
    return new PostgresShareBook(connect(url, 4), keys, { ...options, owned: true });
  }

  // ---------------------------------------------------------------- accounts

  async account(id: string): Promise<AccountRow | undefined> {
    const [r] = await this.sql<AccountRow[]>`
      SELECT account_id, owner, provider, label, connected_ms FROM provider_accounts WHERE account_id = ${id}`;
    return r;
  }

  async accounts(owner: string): Promise<AccountRow[]> {
    return this.sql<AccountRow[]>`
      SELECT account_id, owner, provider, label, connected_ms FROM provider_accounts
        WHERE owner = ${owner} ORDER BY connected_ms, account_id`;
  }

  async putAccount(
    id: string,
    owner: string,
    provider: string,
    secret: string,
    connected?: { label: string; connectedMs: number },
  ): Promise<void> {
    const s = sealSecret(this.keys, id, secret);
    const [iv, ciphertext, tag] = [Buffer.from(s.iv), Buffer.from(s.ciphertext), Buffer.from(s.tag)];
    await this.sql`
      INSERT INTO provider_accounts (account_id, owner, provider, key_id, iv, ciphertext, tag, label, connected_ms)
        VALUES (${id}, ${owner}, ${provider}, ${s.keyId}, ${iv}, ${ciphertext}, ${tag},
          ${connected?.label ?? ''}, ${connected?.connectedMs ?? 0})
      ON CONFLICT (account_id) DO UPDATE SET owner = excluded.owner, provider = excluded.provider,
        key_id = excluded.key_id, iv = excluded.iv, ciphertext = excluded.ciphertext, tag = excluded.tag
        ${connected ? this.sql`, label = excluded.label, connected_ms = excluded.connected_ms` : this.sql``}`;
  }

  async secret(id: string): Promise<{ owner: string; provider: string; secret: string }> {
    const [r] = await this.sql<
      { owner: string; provider: string; key_id: string; iv: Buffer; ciphertext: Buffer; tag: Buffer }[]
    >`SELECT owner, provider, key_id, iv, ciphertext, tag FROM provider_accounts WHERE account_id = ${id}`;
    if (!r) throw new VaultError(`no credentials for account ${id}`);
    const secret = openSecret(this.keys, id, {
      keyId: r.key_id,
      iv: r.iv,
      ciphertext: r.ciphertext,
      tag: r.tag,
    });
    return { owner: r.owner, provider: r.provider, secret };
  }

  private static async lockAccount(tx: Tx, accountId: string): Promise<void> {
    await tx`SELECT pg_advisory_xact_lock(${ACCOUNT_LOCK_CLASS}::int, hashtext(${accountId}))`;
  }

  removeAccount(id: string): Promise<string | undefined> {
    return inTransaction(this.sql, async (tx) => {
      await PostgresShareBook.lockAccount(tx, id);
      const [used] = await tx<{ share_id: string }[]>`
        SELECT share_id FROM share_members WHERE account_id = ${id} ORDER BY share_id LIMIT 1`;
      if (used) return used.share_id;
      await tx`DELETE FROM provider_accounts WHERE account_id = ${id}`;
      return undefined;
    });
  }

  // ---------------------------------------------------------------- shares

  /** Lock the account and refuse a folder overlapping another share's replica there. */
  private static async assertFree(tx: Tx, replica: ReplicaSpec): Promise<ReplicaSpec> {
    const r = replicaSpec(replica);
    await PostgresShareBook.lockAccount(tx, r.accountId);
    const rows = await tx<{ share_id: string; root: string }[]>`
      SELECT share_id, root FROM share_members WHERE account_id = ${r.accountId} ORDER BY share_id`;
    const other = overlapping(rows, r.root);
    if (other !== undefined) throw new ReplicaOverlapError(other);
    return r;
  }

  async create(name: string, owner: string, replica: ReplicaSpec): Promise<Share> {
    replicaSpec(replica);
    if (name.trim() === '') throw new ShareError('a share needs a name', 'InvalidArgument');
    return inTransaction(this.sql, async (tx) => {
      const r = await PostgresShareBook.assertFree(tx, replica);
      const share: Share = { id: randomUUID(), name: name.trim(), owner, createdMs: this.now() };
      await tx`INSERT INTO shares (id, name, owner, created_ms)
        VALUES (${share.id}, ${share.name}, ${owner}, ${share.createdMs})`;
      await tx`INSERT INTO share_members (share_id, member, provider, account_id, root, role, joined_ms)
        VALUES (${share.id}, ${owner}, ${r.provider}, ${r.accountId}, ${r.root}, 'owner', ${share.createdMs})`;
      return share;
    });
  }

  async get(shareId: string): Promise<Share> {
    return PostgresShareBook.getIn(this.sql, shareId);
  }

  private static async getIn(tx: Tx | Sql, shareId: string, lock = false): Promise<Share> {
    const [r] = lock
      ? await tx<ShareSql[]>`SELECT id, name, owner, created_ms FROM shares WHERE id = ${shareId} FOR UPDATE`
      : await tx<ShareSql[]>`SELECT id, name, owner, created_ms FROM shares WHERE id = ${shareId}`;
    if (!r) throw new ShareError(`no share ${shareId}`, 'NotFound');
    return toShare(r);
  }

  private static async membersIn(tx: Tx | Sql, shareId: string): Promise<ShareMember[]> {
    const rows = await tx<MemberSql[]>`
      SELECT share_id, member, provider, account_id, root, role, joined_ms FROM share_members
        WHERE share_id = ${shareId} ORDER BY joined_ms, member COLLATE "C"`;
    return rows.map(toMember);
  }

  members(shareId: string): Promise<ShareMember[]> {
    return PostgresShareBook.membersIn(this.sql, shareId);
  }

  async all(): Promise<Share[]> {
    const rows = await this.sql<ShareSql[]>`
      SELECT id, name, owner, created_ms FROM shares ORDER BY created_ms, id COLLATE "C"`;
    return rows.map(toShare);
  }

  async list(member: string): Promise<Share[]> {
    const rows = await this.sql<ShareSql[]>`
      SELECT s.id, s.name, s.owner, s.created_ms FROM shares s JOIN share_members m ON m.share_id = s.id
        WHERE m.member = ${member} ORDER BY s.created_ms, s.id COLLATE "C"`;
    return rows.map(toShare);
  }

  private static requireMember(
    members: readonly ShareMember[],
    shareId: string,
    member: string,
  ): ShareMember {
    const m = members.find((x) => x.member === member);
    if (!m) throw new ShareError(`${member} is not a member of ${shareId}`, 'Forbidden');
    return m;
  }

  async invite(shareId: string, by: string, ttlMs: number): Promise<string> {
    return inTransaction(this.sql, async (tx) => {
      await PostgresShareBook.getIn(tx, shareId, true);
      PostgresShareBook.requireMember(await PostgresShareBook.membersIn(tx, shareId), shareId, by);
      const token = randomBytes(32).toString('base64url');
      await tx`INSERT INTO share_invites (token_sha256, share_id, invited_by, expires_ms)
        VALUES (${inviteHash(token)}, ${shareId}, ${by}, ${this.now() + ttlMs})`;
      return token;
    });
  }

  private async usableInvite(
    tx: Tx | Sql,
    token: string,
    lock: boolean,
  ): Promise<{ share_id: string; invited_by: string; expires_ms: number }> {
    const hash = inviteHash(token);
    const [inv] = lock
      ? await tx<{ share_id: string; invited_by: string; expires_ms: number; used_by: string | null }[]>`
          SELECT share_id, invited_by, expires_ms, used_by FROM share_invites WHERE token_sha256 = ${hash} FOR UPDATE`
      : await tx<{ share_id: string; invited_by: string; expires_ms: number; used_by: string | null }[]>`
          SELECT share_id, invited_by, expires_ms, used_by FROM share_invites WHERE token_sha256 = ${hash}`;
    if (!inv || inv.used_by !== null)
      throw new ShareError('the invitation is unknown or used', 'InvalidInvite');
    if (inv.expires_ms < this.now()) throw new ShareError('the invitation has expired', 'InviteExpired');
    return inv;
  }

  async preview(token: string): Promise<{ share: Share; invitedBy: string; expiresMs: number }> {
    const inv = await this.usableInvite(this.sql, token, false);
    return { share: await this.get(inv.share_id), invitedBy: inv.invited_by, expiresMs: inv.expires_ms };
  }

  async accept(token: string, member: string, replica: ReplicaSpec): Promise<ShareMember> {
    replicaSpec(replica);
    return inTransaction(this.sql, async (tx) => {
      const inv = await this.usableInvite(tx, token, true);
      const [existing] = await tx`
        SELECT 1 FROM share_members WHERE share_id = ${inv.share_id} AND member = ${member}`;
      if (existing) throw new ShareError(`${member} is already a member`, 'AlreadyMember');
      const r = await PostgresShareBook.assertFree(tx, replica);
      const joined = this.now();
      await tx`UPDATE share_invites SET used_by = ${member} WHERE token_sha256 = ${inviteHash(token)}`;
      await tx`INSERT INTO share_members (share_id, member, provider, account_id, root, role, joined_ms)
        VALUES (${inv.share_id}, ${member}, ${r.provider}, ${r.accountId}, ${r.root}, 'member', ${joined})`;
      return { shareId: inv.share_id, member, ...r, role: 'member' as const, joinedMs: joined };
    });
  }

  async leave(shareId: string, member: string): Promise<void> {
    await inTransaction(this.sql, async (tx) => {
      await PostgresShareBook.getIn(tx, shareId, true).catch((e: unknown) => {
        // Not a share: reported as "not a member", as the SQLite registry does.
        if (e instanceof ShareError)
          throw new ShareError(`${member} is not a member of ${shareId}`, 'Forbidden');
        throw e;
      });
      const members = await PostgresShareBook.membersIn(tx, shareId);
      const m = PostgresShareBook.requireMember(members, shareId, member);
      const others = members.filter((x) => x.member !== member);
      if (m.role === 'owner' && others.length > 0)
        throw new ShareError('the owner leaves last; remove the other members first', 'Forbidden');
      await tx`DELETE FROM share_members WHERE share_id = ${shareId} AND member = ${member}`;
      if (others.length === 0) await tx`DELETE FROM shares WHERE id = ${shareId}`;
    });
  }

  async remove(shareId: string, by: string, member: string): Promise<void> {
    await inTransaction(this.sql, async (tx) => {
      const share = await PostgresShareBook.getIn(tx, shareId, true);
      if (share.owner !== by) throw new ShareError('only the owner removes members', 'Forbidden');
      if (member === by) throw new ShareError('the owner leaves instead', 'InvalidArgument');
      PostgresShareBook.requireMember(await PostgresShareBook.membersIn(tx, shareId), shareId, member);
      await tx`DELETE FROM share_members WHERE share_id = ${shareId} AND member = ${member}`;
    });
  }

  async close(): Promise<void> {
    if (this.owned) await this.sql.end({ timeout: 5 });
  }
}
