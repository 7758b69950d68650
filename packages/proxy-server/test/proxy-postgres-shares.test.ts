/**
 * Shared folders with proxy instances on one PostgreSQL (issue #18): two servers sharing the
 * database, the filesystem and object tiers and the vault key. The registry and the mirror
 * engines' books are on PostgreSQL (no mirror.sqlite anywhere), so whichever
 * server is asked answers alike; the engines run on one server only (the controller role's
 * job) and follow membership changes made
 * through the other; when the controller stops, the other takes the role and its engine
 * resumes from the same books. A real cluster (src/testing/postgres.ts), skipped with the reason only where the
 * machine has no PostgreSQL server binaries.
 */
import { randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { ShareInfo, ShareInviteResponse, SharesResponse } from '@weft/wire';
import { postgresBinaries } from '../src/testing/postgres.ts';
import { startTestServer, TestClient } from './helpers.ts';
import { type SharedStorage, startSharedStorage } from './pg-shared.ts';

const bins = postgresBinaries();

describe.skipIf('missing' in bins)(
  `shares on proxy servers sharing PostgreSQL${'missing' in bins ? ` (skipped: ${bins.missing})` : ''}`,
  () => {
    let storage: SharedStorage | undefined;
    let one: Awaited<ReturnType<typeof startTestServer>>;
    let two: Awaited<ReturnType<typeof startTestServer>>;

    beforeAll(async () => {
      storage = await startSharedStorage('weft-pg-shares-');
      const config = {
        ...storage.tiers,
        shares: {
          enabled: true,
          pollIntervalMs: 100,
          notifyBatchMs: 50,
          key: randomBytes(32).toString('hex'),
        },
      };
      // The first to start holds the controller role, and so runs the engines.
      one = await startTestServer(config);
      two = await startTestServer(config);
    });
    afterAll(async () => {
      await one?.stop();
      await two?.stop();
      await storage?.stop();
    });

    it('eitherServerServesTheSameSharesAndTheEnginesFollowAndMoveBetweenThem', async () => {
      const annOne = await TestClient.enrol(one, 'ann');
      const annTwo = new TestClient(two.url, annOne.token);
      const benTwo = await TestClient.enrol(two, 'ben');
      const benOne = new TestClient(one.url, benTwo.token);
      await annOne.putSmall({ 'Team/plan.txt': 'plan v1' });

      const created = await annOne.json<ShareInfo>('POST', '/v1/shares', {
        name: 'Team',
        replica: { cloud: 'weft', root: 'Team' },
      });
      // Made through one, refused as a duplicate through two (one registry).
      const again = await annTwo.req('POST', '/v1/shares', {
        name: 'x',
        replica: { cloud: 'weft', root: 'Team' },
      });
      expect(again.status).toBe(409);
      const invite = await annTwo.json<ShareInviteResponse>('POST', `/v1/shares/${created.id}/invites`, {});
      await benTwo.json('POST', '/v1/shares/accept', {
        token: invite.token,
        replica: { cloud: 'weft', root: 'FromAnn' },
      });
      // The invitation was used through two: refused through one.
      const reused = await benOne.req('POST', '/v1/shares/accept', {
        token: invite.token,
        replica: { cloud: 'weft', root: 'Other' },
      });
      expect(reused.status).toBe(404);
      for (const c of [annOne, annTwo, benOne, benTwo]) {
        const { shares } = await c.json<SharesResponse>('GET', '/v1/shares');
        expect(shares.map((s) => [s.id, s.members.map((m) => m.member)])).toEqual([
          [created.id, ['ann', 'ben']],
        ]);
      }

      // Ben joined through two; the engine runs on one, which picks the new member up.
      await vi.waitFor(async () => expect(await benTwo.text('FromAnn/plan.txt')).toBe('plan v1'), {
        timeout: 20_000,
        interval: 100,
      });
      await benTwo.putSmall({ 'FromAnn/reply.txt': 'from ben' });
      await vi.waitFor(async () => expect(await annTwo.text('Team/reply.txt')).toBe('from ben'), {
        timeout: 20_000,
        interval: 100,
      });

      // Only the controller's engine did that.
      expect(one.shares!.stats(created.id).applied).toBeGreaterThan(0);
      expect(two.shares!.stats(created.id).applied).toBe(0);
      // The books are in PostgreSQL: no SQLite file was made for them.
      for (const dir of [one.dir, two.dir, storage!.dir])
        expect(await fsp.readdir(dir)).not.toContain('mirror.sqlite');
      // The controller stops: two takes the role over and runs the engines on the same books.
      await one.stop();
      await annTwo.putSmall({ 'Team/after.txt': 'after the move' });
      await vi.waitFor(async () => expect(await benTwo.text('FromAnn/after.txt')).toBe('after the move'), {
        timeout: 20_000,
        interval: 100,
      });
      // Nothing was done twice in a way a user sees: no conflict copies, nothing else.
      const names = async (c: TestClient, dir: string) =>
        (await c.json<{ entries: { path: string }[] }>('GET', `/v1/list?path=${dir}`)).entries
          .map((e) => e.path)
          .sort();
      expect(await names(benTwo, 'FromAnn')).toEqual([
        'FromAnn/after.txt',
        'FromAnn/plan.txt',
        'FromAnn/reply.txt',
      ]);
      expect(await names(annTwo, 'Team')).toEqual(['Team/after.txt', 'Team/plan.txt', 'Team/reply.txt']);
      expect(two.shares!.stats(created.id).conflicts).toBe(0);

      // Ben leaves: the share is the owner's alone, on the remaining server too.
      expect((await benTwo.req('POST', `/v1/shares/${created.id}/leave`)).status).toBe(204);
      expect(
        (await annTwo.json<ShareInfo>('GET', `/v1/shares/${created.id}`)).members.map((m) => m.member),
      ).toEqual(['ann']);
    });
  },
);
