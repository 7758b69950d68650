/**
 * The proxy on the PostgreSQL metadata store: two proxy servers (as two processes would be)
 * sharing one database, one filesystem tier and one object tier. A device enrolled on one is
 * known to the other; what one records the other serves; both feeding one namespace at once
 * gives one gapless, ordered feed; a feed socket on one hears the other's changes at once
 * (LISTEN/NOTIFY); an invite made on one is used once through either; a reader taking its
 * pages alternately from both while both record resumes from each cursor with every change
 * once, in order; content one uploaded the other links without a byte sent; a large file one
 * staged in the relay cache (on the shared filesystem tier) the other serves from there. A real cluster
 * (src/testing/postgres.ts), skipped with the reason only where the machine has no server.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { ChangeRecord, ChangesResponse } from '@weft/wire';
import { postgresBinaries } from '../src/testing/postgres.ts';
import { pseudoRandom, readFeed, sha, startTestServer, TestClient, uploadLarge } from './helpers.ts';
import { type SharedStorage, startSharedStorage } from './pg-shared.ts';

const bins = postgresBinaries();
const MiB = 1024 * 1024;

describe.skipIf('missing' in bins)(
  `proxy servers sharing PostgreSQL${'missing' in bins ? ` (skipped: ${bins.missing})` : ''}`,
  () => {
    let storage: SharedStorage | undefined;
    let one: Awaited<ReturnType<typeof startTestServer>>;
    let two: Awaited<ReturnType<typeof startTestServer>>;

    beforeAll(async () => {
      storage = await startSharedStorage('weft-pg-shared-');
      one = await startTestServer(storage.tiers);
      two = await startTestServer(storage.tiers);
    });
    afterAll(async () => {
      await one?.stop();
      await two?.stop();
      await storage?.stop();
    });

    it('aDeviceEnrolledOnOneServerIsServedByTheOther', async () => {
      const onOne = await TestClient.enrol(one, 'ann', 'laptop');
      const onTwo = new TestClient(two.url, onOne.token);
      expect(await onTwo.json('GET', '/v1/whoami')).toMatchObject({
        user: 'ann',
        deviceName: 'laptop',
        seq: 0,
      });
      await onOne.putSmall({ 'notes/a.txt': 'from one' });
      expect(await onTwo.text('notes/a.txt')).toBe('from one');
      const devices = await onTwo.json<{ devices: { id: string }[] }>('GET', '/v1/devices');
      expect(devices.devices).toHaveLength(1);
      // Revoked through the other server: refused on both at once.
      await onTwo.req('DELETE', `/v1/devices/${devices.devices[0]!.id}`);
      expect((await onOne.req('GET', '/v1/whoami')).status).toBe(401);
    });

    it('bothServersWritingOneNamespaceGiveOneGaplessFeed', async () => {
      const a = await TestClient.enrol(one, 'bea', 'a');
      const b = new TestClient(two.url, (await TestClient.enrol(two, 'bea', 'b')).token);
      const N = 15;
      // Distinct paths here; the same paths through both servers: cluster-ordering.test.ts.
      const write = async (c: TestClient, side: string) => {
        for (let i = 0; i < N; i++) {
          const r = await c.putSmall({
            [`${side}/${i}.txt`]: `${side}${i}`,
            [`${side}/last.txt`]: `${side}${i}`,
          });
          expect(r.map((x) => x.result.status)).toEqual(['applied', 'applied']);
        }
      };
      await Promise.all([write(a, 'one'), write(b, 'two')]);
      const all: ChangeRecord[] = [];
      for (let cursor = 0; ;) {
        const page = await a.json<ChangesResponse>('GET', `/v1/changes?cursor=${cursor}&limit=7`);
        all.push(...page.changes);
        cursor = page.cursor;
        if (!page.hasMore) break;
      }
      expect(all.map((c) => c.seq)).toEqual(all.map((_, i) => i + 1));
      const paths = new Set(all.map((c) => c.path));
      for (let i = 0; i < N; i++) expect(paths.has(`one/${i}.txt`) && paths.has(`two/${i}.txt`)).toBe(true);
      // The last write of each side's last.txt in the feed is what both servers serve.
      for (const side of ['one', 'two']) {
        const last = all.filter((c) => c.path === `${side}/last.txt`).at(-1);
        expect(last).toMatchObject({ type: 'upsert', entry: { sha256: sha(`${side}${N - 1}`) } });
        expect(await a.text(`${side}/last.txt`)).toBe(`${side}${N - 1}`);
        expect(await b.text(`${side}/last.txt`)).toBe(`${side}${N - 1}`);
      }
    });

    it('anInviteMadeOnOneServerIsUsedOnceThroughEitherServer', async () => {
      const made = await fetch(`${one.url}/v1/invites`, {
        method: 'POST',
        headers: { authorization: `Bearer ${one.adminToken}`, 'content-type': 'application/json' },
        body: JSON.stringify({ user: 'gus' }),
      });
      expect(made.status).toBe(201);
      const { invite } = (await made.json()) as { invite: string };
      const enrol = (url: string, deviceName: string) =>
        fetch(`${url}/v1/enrol`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ user: 'gus', deviceName, invite }),
        });
      // Both servers at once: one device, whichever wins.
      const answers = await Promise.all([enrol(one.url, 'via-one'), enrol(two.url, 'via-two')]);
      expect(answers.map((r) => r.status).sort()).toEqual([201, 403]);
      const won = answers.find((r) => r.status === 201)!;
      const { token } = (await won.json()) as { token: string };
      // Its token works on both; the user has that one device; a third try is refused too.
      for (const url of [one.url, two.url]) {
        const c = new TestClient(url, token);
        expect(await c.json('GET', '/v1/whoami')).toMatchObject({ user: 'gus' });
        expect((await c.json<{ devices: unknown[] }>('GET', '/v1/devices')).devices).toHaveLength(1);
      }
      expect((await enrol(two.url, 'again')).status).toBe(403);
    });

    it('aReaderMovingBetweenServersGetsEveryChangeOnceInOrderWhileBothWrite', async () => {
      const a = await TestClient.enrol(one, 'hal', 'a');
      const b = new TestClient(two.url, (await TestClient.enrol(two, 'hal', 'b')).token);
      const readers = [new TestClient(one.url, a.token), new TestClient(two.url, a.token)];
      const N = 12;
      let writing = true;
      const write = async (c: TestClient, side: string) => {
        for (let i = 0; i < N; i++)
          await c.putSmall({ [`${side}/${i}.txt`]: `${side}${i}`, [`${side}/last.txt`]: `${side}${i}` });
      };
      const writers = Promise.all([write(a, 'one'), write(b, 'two')]).finally(() => {
        writing = false;
      });
      // Page by page, each page from the other server, resuming from the cursor the last
      // page gave — while both servers are still recording.
      const got: ChangeRecord[] = [];
      let cursor = 0;
      for (let turn = 0; ; turn++) {
        const done = !writing;
        const page = await readers[turn % 2]!.json<ChangesResponse>(
          'GET',
          `/v1/changes?cursor=${cursor}&limit=5`,
        );
        got.push(...page.changes);
        cursor = page.cursor;
        if (done && !page.hasMore) break;
      }
      await writers;
      expect(got.map((c) => c.seq)).toEqual(got.map((_, i) => i + 1));
      // Every file write (the folders' own records come with their first file).
      expect(got.filter((c) => c.path.endsWith('.txt'))).toHaveLength(4 * N);
      // Exactly what a reader of the finished feed gets from one server in one go.
      const whole = await b.json<ChangesResponse>('GET', '/v1/changes?cursor=0&limit=1000');
      expect(got).toEqual(whole.changes);
    });

    it('aFeedSocketOnOneServerHearsTheOthersChangesAtOnce', async () => {
      const writer = await TestClient.enrol(one, 'cy', 'writer');
      const reader = new TestClient(two.url, (await TestClient.enrol(two, 'cy', 'reader')).token);
      const heard = readFeed(reader, 0, (c) => c.some((r) => r.path === 'late.txt'));
      await new Promise((r) => setTimeout(r, 100)); // the socket is open and has read the feed
      await writer.putSmall({ 'late.txt': 'written on one' });
      const { changes } = await heard;
      expect(changes.find((r) => r.path === 'late.txt')).toMatchObject({ seq: 1, type: 'upsert' });
    });

    it('contentUploadedThroughOneIsLinkedThroughTheOther', async () => {
      const a = await TestClient.enrol(one, 'dee', 'a');
      const b = new TestClient(two.url, (await TestClient.enrol(two, 'dee', 'b')).token);
      const data = pseudoRandom(5 * MiB, 3);
      expect((await uploadLarge(a, 'big.bin', data)).status).toBe('applied');
      const [linked] = await b.ops({
        op: 'commit',
        path: 'copy.bin',
        sha256: sha(data),
        size: data.length,
        mtimeMs: 1,
      });
      expect(linked?.status).toBe('applied');
      expect(sha(await b.bytes('copy.bin'))).toBe(sha(data));
      expect((await one.store.meta.getObject(sha(data)))?.refcount).toBe(2);
      // Another user cannot link it by naming its hash, through either server.
      const eve = await TestClient.enrol(two, 'eve', 'e');
      const [refused] = await eve.ops({
        op: 'commit',
        path: 'x.bin',
        sha256: sha(data),
        size: data.length,
        mtimeMs: 1,
      });
      expect(refused).toMatchObject({ status: 'error', error: { code: 'OBJECT_UNKNOWN' } });
    });

    it('aLargeFileStagedInTheRelayByOneIsServedByTheOtherWithoutStagingAgain', async () => {
      const a = await TestClient.enrol(one, 'fay', 'a');
      const b = new TestClient(two.url, (await TestClient.enrol(two, 'fay', 'b')).token);
      const data = pseudoRandom(3 * MiB, 9);
      expect((await uploadLarge(a, 'film.bin', data)).status).toBe('applied');
      expect(sha(await a.bytes('film.bin'))).toBe(sha(data)); // staged by one
      const before = { ...two.store.relay.stats };
      expect(sha(await b.bytes('film.bin'))).toBe(sha(data));
      expect(two.store.relay.stats.misses - before.misses).toBe(0);
      expect(two.store.relay.stats.hits - before.hits).toBe(1);
      // Forgotten through two (as after GC) once the reads have let go: gone for both.
      await vi.waitFor(async () => {
        await two.store.relay.forget(sha(data));
        expect(await one.store.relay.has(sha(data))).toBe(false);
      }, 15_000); // until the reads' pins are let go (slow on a loaded machine)
    });
  },
);
