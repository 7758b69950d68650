/**
 * The shares registry (src/shares/book.ts) conformance suite, one suite on both books: SQLite
 * (the mirror's registry and vault on mirror.sqlite) and PostgreSQL (a real cluster,
 * src/testing/postgres.ts; skipped with the reason only where the machine has no server).
 * Each test opens two books on one database (two connections, as two proxy instances would
 * have) and a clock it moves.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keysFromEnv, openDatabase, type VaultKeys } from '@weft/mirror';
import { type ShareBook, SqliteShareBook } from '../src/shares/book.ts';
import { PostgresShareBook } from '../src/shares/book-postgres.ts';
import { connect, migratePostgres } from '../src/store/postgres-db.ts';
import { postgresBinaries, type RunningPostgres, startPostgres } from '../src/testing/postgres.ts';
import { adminSql } from './pg-admin.ts';

const bins = postgresBinaries();
let cluster: RunningPostgres | undefined;
beforeAll(async () => {
  if (!('missing' in bins)) cluster = await startPostgres(adminSql);
});
afterAll(async () => cluster?.stop());

interface Opened {
  a: ShareBook;
  b: ShareBook;
  clock: { t: number };
  close(): Promise<void>;
}

const keys = (): VaultKeys => keysFromEnv({ WEFT_MIRROR_KEY: randomBytes(32).toString('hex') });

const kinds: { name: string; skip?: string; open: (k: VaultKeys) => Promise<Opened> }[] = [
  {
    name: 'sqlite',
    open: async (k) => {
      const dir = mkdtempSync(join(tmpdir(), 'weft-sharebook-'));
      const clock = { t: 1_000_000 };
      const dbs = [0, 1].map(() => {
        const db = openDatabase(join(dir, 'mirror.sqlite'));
        db.pragma('foreign_keys = ON');
        return db;
      });
      const [a, b] = dbs.map((db) => new SqliteShareBook(db, k, { now: () => clock.t }));
      return {
        a: a!,
        b: b!,
        clock,
        close: async () => {
          for (const db of dbs) db.close();
          rmSync(dir, { recursive: true, force: true });
        },
      };
    },
  },
  {
    name: 'postgres',
    ...('missing' in bins ? { skip: bins.missing } : {}),
    open: async (k) => {
      const url = await cluster!.createDatabase();
      const sql = connect(url, 1);
      await migratePostgres(sql);
      await sql.end();
      const clock = { t: 1_000_000 };
      const a = PostgresShareBook.open(url, k, { now: () => clock.t });
      const b = PostgresShareBook.open(url, k, { now: () => clock.t });
      return {
        a,
        b,
        clock,
        close: async () => {
          await a.close();
          await b.close();
        },
      };
    },
  },
];

for (const kind of kinds) {
  describe.skipIf(kind.skip !== undefined)(
    `shares registry (${kind.name})${kind.skip ? ` (skipped: ${kind.skip})` : ''}`,
    () => {
      const withBooks =
        (fn: (o: Opened) => Promise<void>, k: VaultKeys = keys()) =>
        async () => {
          const o = await kind.open(k);
          try {
            await fn(o);
          } finally {
            await o.close();
          }
        };

      it(
        'createsInvitesAcceptsAndListsWhicheverInstanceIsAsked',
        withBooks(async ({ a, b, clock }) => {
          const share = await a.create(' Team ', 'ann', {
            provider: 'dropbox',
            accountId: 'ann-dbx',
            root: '/Team/Plans/',
          });
          expect(share).toMatchObject({ name: 'Team', owner: 'ann', createdMs: 1_000_000 });
          expect(await b.get(share.id)).toEqual(share);
          const token = await b.invite(share.id, 'ann', 60_000);
          expect(await a.preview(token)).toEqual({ share, invitedBy: 'ann', expiresMs: 1_060_000 });
          const ben = await a.accept(token, 'ben', {
            provider: 'gdrive',
            accountId: 'ben-drive',
            root: 'Shared/Team',
          });
          expect(ben).toMatchObject({
            shareId: share.id,
            role: 'member',
            provider: 'gdrive',
            root: 'Shared/Team',
          });
          expect((await b.members(share.id)).map((m) => [m.member, m.provider, m.root, m.role])).toEqual([
            ['ann', 'dropbox', 'Team/Plans', 'owner'],
            ['ben', 'gdrive', 'Shared/Team', 'member'],
          ]);
          expect((await b.list('ben')).map((s) => s.name)).toEqual(['Team']);
          expect(await a.list('carl')).toEqual([]);
          clock.t += 1;
          const second = await b.create('Other', 'ben', {
            provider: 'weft',
            accountId: 'weft:ben',
            root: 'o',
          });
          expect((await a.all()).map((s) => s.id)).toEqual([share.id, second.id]);
        }),
      );

      it(
        'refusesBadInputWithTheRegistrysErrorsAndChangesNothing',
        withBooks(async ({ a, b, clock }) => {
          await expect(
            a.create(' ', 'ann', { provider: 'weft', accountId: 'x', root: '' }),
          ).rejects.toMatchObject({
            code: 'InvalidArgument',
          });
          await expect(
            a.create('T', 'ann', { provider: '', accountId: 'x', root: '' }),
          ).rejects.toMatchObject({
            code: 'InvalidArgument',
          });
          expect(await b.all()).toEqual([]);
          const share = await a.create('T', 'ann', { provider: 'onedrive', accountId: 'a', root: '' });
          await expect(a.get('nope')).rejects.toMatchObject({ code: 'NotFound' });
          await expect(a.invite('nope', 'ann', 1000)).rejects.toMatchObject({ code: 'NotFound' });
          await expect(b.invite(share.id, 'mallory', 1000)).rejects.toMatchObject({ code: 'Forbidden' });
          const token = await a.invite(share.id, 'ann', 60_000);
          await b.accept(token, 'ben', { provider: 'weft', accountId: 'b', root: '' });
          await expect(
            a.accept(token, 'carl', { provider: 'weft', accountId: 'c', root: '' }),
          ).rejects.toMatchObject({
            code: 'InvalidInvite',
          });
          const late = await b.invite(share.id, 'ben', 60_000);
          // A refused attempt (already a member) does not use the invitation up.
          await expect(
            a.accept(late, 'ann', { provider: 'weft', accountId: 'a2', root: 'x' }),
          ).rejects.toMatchObject({
            code: 'AlreadyMember',
          });
          expect((await b.preview(late)).share.id).toBe(share.id);
          clock.t += 60_001;
          await expect(
            a.accept(late, 'carl', { provider: 'weft', accountId: 'c', root: '' }),
          ).rejects.toMatchObject({
            code: 'InviteExpired',
          });
          await expect(b.preview(late)).rejects.toMatchObject({ code: 'InviteExpired' });
          await expect(a.preview('forged')).rejects.toMatchObject({ code: 'InvalidInvite' });
          expect((await a.members(share.id)).map((m) => m.member)).toEqual(['ann', 'ben']);
        }),
      );

      it(
        'refusesAReplicaFolderOverlappingAnotherSharesInTheSameAccount',
        withBooks(async ({ a, b }) => {
          const s1 = await a.create('One', 'ann', {
            provider: 'dropbox',
            accountId: 'acc',
            root: 'Team/Plans',
          });
          for (const root of ['Team/Plans', 'Team', 'Team/Plans/2024', '']) {
            await expect(
              b.create('Two', 'ann', { provider: 'dropbox', accountId: 'acc', root }),
            ).rejects.toMatchObject({
              shareId: s1.id,
              message: expect.stringMatching(/overlaps/),
            });
          }
          // Another folder, or the same folder in another account, is fine.
          await b.create('Two', 'ann', { provider: 'dropbox', accountId: 'acc', root: 'Team/Plans2' });
          const s3 = await b.create('Three', 'ann', {
            provider: 'dropbox',
            accountId: 'other',
            root: 'Team/Plans',
          });
          const token = await a.invite(s3.id, 'ann', 60_000);
          await expect(
            b.accept(token, 'ben', { provider: 'dropbox', accountId: 'acc', root: 'Team/Plans/x' }),
          ).rejects.toMatchObject({
            shareId: s1.id,
          });
          // Refused: the invitation is still good.
          await b.accept(token, 'ben', { provider: 'gdrive', accountId: 'ben', root: 'T' });
          expect((await a.members(s3.id)).map((m) => m.member)).toEqual(['ann', 'ben']);
        }),
      );

      it(
        'twoInstancesAcceptingOneInvitationAtOnceGiveOneMember',
        withBooks(async ({ a, b }) => {
          const share = await a.create('T', 'ann', { provider: 'weft', accountId: 'weft:ann', root: 'T' });
          for (let i = 0; i < 5; i++) {
            const token = await a.invite(share.id, 'ann', 60_000);
            const got = await Promise.allSettled([
              a.accept(token, `x${i}`, { provider: 'weft', accountId: `weft:x${i}`, root: 'T' }),
              b.accept(token, `y${i}`, { provider: 'weft', accountId: `weft:y${i}`, root: 'T' }),
            ]);
            expect(got.filter((g) => g.status === 'fulfilled')).toHaveLength(1);
            expect(got.find((g) => g.status === 'rejected')).toMatchObject({
              reason: { code: 'InvalidInvite' },
            });
          }
          expect(await b.members(share.id)).toHaveLength(6);
        }),
      );

      it(
        'leaveAndRemoveOwnerOnlyAndTheOwnerLeavesLast',
        withBooks(async ({ a, b }) => {
          const share = await a.create('T', 'ann', { provider: 'dropbox', accountId: 'a', root: 'x' });
          for (const m of ['ben', 'cat'])
            await b.accept(await a.invite(share.id, 'ann', 60_000), m, {
              provider: 'gdrive',
              accountId: m,
              root: 'y',
            });
          await expect(a.remove(share.id, 'ben', 'cat')).rejects.toThrow(/only the owner/);
          await expect(b.remove(share.id, 'ann', 'ann')).rejects.toMatchObject({ code: 'InvalidArgument' });
          await expect(b.remove(share.id, 'ann', 'dan')).rejects.toMatchObject({ code: 'Forbidden' });
          await expect(b.leave(share.id, 'ann')).rejects.toThrow(/owner leaves last/);
          await expect(b.leave(share.id, 'dan')).rejects.toMatchObject({ code: 'Forbidden' });
          await a.leave(share.id, 'ben');
          await b.remove(share.id, 'ann', 'cat');
          expect((await a.members(share.id)).map((m) => m.member)).toEqual(['ann']);
          await b.leave(share.id, 'ann');
          expect(await a.list('ann')).toEqual([]);
          await expect(a.get(share.id)).rejects.toThrow(/no share/);
          await expect(a.leave(share.id, 'ann')).rejects.toMatchObject({ code: 'Forbidden' });
        }),
      );

      it(
        'keepsCredentialsEncryptedReadableByEveryInstanceAndForgetsOnlyUnusedAccounts',
        withBooks(async ({ a, b }) => {
          await a.putAccount('acc_1', 'ann', 'dropbox', '{"refreshToken":"r-ann"}', {
            label: 'ann@example.com',
            connectedMs: 5,
          });
          await a.putAccount('acc_0', 'ann', 'gdrive', 's0', { label: 'g', connectedMs: 7 });
          expect(await b.secret('acc_1')).toEqual({
            owner: 'ann',
            provider: 'dropbox',
            secret: '{"refreshToken":"r-ann"}',
          });
          expect((await b.accounts('ann')).map((r) => [r.account_id, r.label, r.connected_ms])).toEqual([
            ['acc_1', 'ann@example.com', 5],
            ['acc_0', 'g', 7],
          ]);
          // A token refresh replaces the secret, keeping label and time.
          await b.putAccount('acc_1', 'ann', 'dropbox', 'refreshed');
          expect((await a.secret('acc_1')).secret).toBe('refreshed');
          expect(await a.account('acc_1')).toMatchObject({ label: 'ann@example.com', connected_ms: 5 });
          expect(await a.accounts('ben')).toEqual([]);
          const share = await a.create('T', 'ann', { provider: 'dropbox', accountId: 'acc_1', root: 'T' });
          expect(await b.removeAccount('acc_1')).toBe(share.id);
          expect((await a.secret('acc_1')).secret).toBe('refreshed');
          expect(await b.removeAccount('acc_0')).toBeUndefined();
          expect(await a.account('acc_0')).toBeUndefined();
          await expect(a.secret('acc_0')).rejects.toMatchObject({ code: 'Vault' });
        }),
      );
    },
  );
}
