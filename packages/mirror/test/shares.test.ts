import { randomBytes } from 'node:crypto';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { MemoryProvider } from '@weft/providers';
import { ShareRegistry } from '../src/shares.ts';
import { migrate } from '../src/store.ts';
import { CredentialVault, keysFromEnv } from '../src/vault.ts';

const dbs: Database.Database[] = [];
afterEach(() => {
  for (const db of dbs.splice(0)) db.close();
});

function fresh(): { db: Database.Database; reg: ShareRegistry; clock: { t: number } } {
  const db = new Database(':memory:');
  dbs.push(db);
  db.pragma('foreign_keys = ON');
  migrate(db);
  const clock = { t: 1_000_000 };
  return { db, reg: new ShareRegistry(db, { now: () => clock.t, inviteTtlMs: 60_000 }), clock };
}

describe('share management', () => {
  it('create from a folder, invite, accept with one’s own cloud and folder, list', () => {
    const { reg } = fresh();
    const share = reg.create('Team', 'ann', {
      provider: 'dropbox',
      accountId: 'ann-dbx',
      root: '/Team/Plans/',
    });
    const token = reg.invite(share.id, 'ann');
    const ben = reg.accept(token, 'ben', { provider: 'gdrive', accountId: 'ben-drive', root: 'Shared/Team' });
    expect(ben).toMatchObject({ shareId: share.id, role: 'member', provider: 'gdrive', root: 'Shared/Team' });
    expect(reg.members(share.id).map((m) => [m.member, m.provider, m.root, m.role])).toEqual([
      ['ann', 'dropbox', 'Team/Plans', 'owner'],
      ['ben', 'gdrive', 'Shared/Team', 'member'],
    ]);
    expect(reg.list('ben').map((s) => s.name)).toEqual(['Team']);
    expect(reg.list('carl')).toEqual([]);
  });

  it('invitations are single-use, expire, and are stored only as a hash', () => {
    const { db, reg, clock } = fresh();
    const share = reg.create('T', 'ann', { provider: 'onedrive', accountId: 'a', root: '' });
    const token = reg.invite(share.id, 'ann');
    const stored = JSON.stringify(db.prepare('SELECT * FROM share_invites').all());
    expect(stored).not.toContain(token);
    reg.accept(token, 'ben', { provider: 'weft', accountId: 'b', root: '' });
    expect(() => reg.accept(token, 'carl', { provider: 'weft', accountId: 'c', root: '' })).toThrow(
      expect.objectContaining({ code: 'InvalidInvite', message: expect.stringMatching(/used/) }),
    );
    const late = reg.invite(share.id, 'ben');
    // A refused attempt (someone already a member) does not use the invitation up.
    expect(() => reg.accept(late, 'ann', { provider: 'weft', accountId: 'a2', root: 'x' })).toThrow(
      expect.objectContaining({ code: 'AlreadyMember' }),
    );
    expect(reg.preview(late).share.id).toBe(share.id);
    clock.t += 60_001;
    // Expired: its own code (the API answers 410 INVITE_EXPIRED), for accept and preview alike.
    expect(() => reg.accept(late, 'carl', { provider: 'weft', accountId: 'c', root: '' })).toThrow(
      expect.objectContaining({ code: 'InviteExpired' }),
    );
    expect(() => reg.preview(late)).toThrow(expect.objectContaining({ code: 'InviteExpired' }));
    expect(() => reg.accept('forged', 'carl', { provider: 'weft', accountId: 'c', root: '' })).toThrow(
      /unknown/,
    );
    expect(() => reg.invite(share.id, 'mallory')).toThrow(/not a member/);
  });

  it('leave, remove (owner only), and the owner leaves last', () => {
    const { reg } = fresh();
    const share = reg.create('T', 'ann', { provider: 'dropbox', accountId: 'a', root: 'x' });
    for (const m of ['ben', 'cat']) {
      reg.accept(reg.invite(share.id, 'ann'), m, { provider: 'gdrive', accountId: m, root: 'y' });
    }
    expect(() => reg.remove(share.id, 'ben', 'cat')).toThrow(/only the owner/);
    expect(() => reg.leave(share.id, 'ann')).toThrow(/owner leaves last/);
    reg.leave(share.id, 'ben');
    reg.remove(share.id, 'ann', 'cat');
    expect(reg.members(share.id).map((m) => m.member)).toEqual(['ann']);
    reg.leave(share.id, 'ann');
    expect(reg.list('ann')).toEqual([]);
    expect(() => reg.get(share.id)).toThrow(/no share/);
  });

  it('builds the engine’s replicas from members and their decrypted credentials', () => {
    const { db, reg } = fresh();
    const vault = new CredentialVault(
      db,
      keysFromEnv({ WEFT_MIRROR_KEY: randomBytes(32).toString('base64') }),
    );
    vault.put('ann-dbx', 'ann', 'dropbox', '{"refresh_token":"r-ann"}');
    vault.put('ben-drive', 'ben', 'gdrive', '{"refresh_token":"r-ben"}');
    const share = reg.create('T', 'ann', { provider: 'dropbox', accountId: 'ann-dbx', root: 'T' });
    reg.accept(reg.invite(share.id, 'ann'), 'ben', { provider: 'gdrive', accountId: 'ben-drive', root: 'U' });
    const seen: string[] = [];
    const replicas = reg.replicas(share.id, vault, (provider, secret) => {
      seen.push(`${provider}:${secret}`);
      return { provider: new MemoryProvider({ name: provider }) };
    });
    expect(replicas.map((r) => [r.id, r.member, r.root])).toEqual([
      ['ann@ann-dbx', 'ann', 'T'],
      ['ben@ben-drive', 'ben', 'U'],
    ]);
    expect(seen).toEqual(['dropbox:{"refresh_token":"r-ann"}', 'gdrive:{"refresh_token":"r-ben"}']);
  });
});

describe('credential vault (AES-256-GCM at rest)', () => {
  const key = () => randomBytes(32).toString('hex');

  it('stores ciphertext only; round-trips; a wrong key, a tampered record or a swapped account fail', () => {
    const { db } = fresh();
    const k1 = key();
    const vault = new CredentialVault(db, keysFromEnv({ WEFT_MIRROR_KEY: k1 }));
    vault.put('acct-1', 'ann', 'dropbox', 'secret-refresh-token-1');
    vault.put('acct-2', 'ann', 'dropbox', 'secret-refresh-token-2');
    const raw = db.prepare('SELECT * FROM provider_accounts').all();
    expect(JSON.stringify(raw)).not.toContain('secret-refresh-token');
    expect(
      Buffer.concat((raw as { ciphertext: Buffer }[]).map((r) => r.ciphertext)).toString(),
    ).not.toContain('secret');
    expect(vault.get('acct-1').secret).toBe('secret-refresh-token-1');

    const other = new CredentialVault(db, keysFromEnv({ WEFT_MIRROR_KEY: key() }));
    expect(() => other.get('acct-1')).toThrow(/not configured/);

    // (|| makes TEXT: cast back, the STRICT column takes only a BLOB)
    db.prepare(
      "UPDATE provider_accounts SET ciphertext = CAST(X'00' || ciphertext AS BLOB) WHERE account_id = 'acct-1'",
    ).run();
    expect(() => vault.get('acct-1')).toThrow(/failed authentication/);

    // Copying acct-2's record onto acct-3 does not give acct-3 those credentials (AAD).
    db.prepare(
      'INSERT INTO provider_accounts (account_id, owner, provider, key_id, iv, ciphertext, tag) ' +
        "SELECT 'acct-3', owner, provider, key_id, iv, ciphertext, tag FROM provider_accounts WHERE account_id = 'acct-2'",
    ).run();
    expect(() => vault.get('acct-3')).toThrow(/failed authentication/);
  });

  it('rotates to a new key while old records stay readable through WEFT_MIRROR_OLD_KEYS', () => {
    const { db } = fresh();
    const k1 = key();
    const old = keysFromEnv({ WEFT_MIRROR_KEY: k1 });
    new CredentialVault(db, old).put('a', 'ann', 'gdrive', 's1');
    const rotated = new CredentialVault(
      db,
      keysFromEnv({ WEFT_MIRROR_KEY: key(), WEFT_MIRROR_OLD_KEYS: `${old.currentKeyId}=${k1}` }),
    );
    expect(rotated.get('a').secret).toBe('s1');
    expect(rotated.rotate()).toBe(1);
    expect(() => new CredentialVault(db, old).get('a')).toThrow(/not configured/);
    expect(rotated.get('a').secret).toBe('s1');
  });

  it('refuses a key that is not 32 bytes', () => {
    expect(() => keysFromEnv({ WEFT_MIRROR_KEY: 'short' })).toThrow(/32 bytes/);
    expect(() => keysFromEnv({})).toThrow(/not set/);
  });
});
