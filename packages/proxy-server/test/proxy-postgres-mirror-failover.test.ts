/**
 * A share mirror survives its controller's death (issue #18): two proxy instances on one
 * PostgreSQL (real, src/testing/postgres.ts), the first a child process — the controller,
 * running the share's mirror engine with its books on PostgreSQL (pg-migrations/007) — the
 * second in this process. While the mirror is copying a batch of files from one member's
 * folder to the other's, the child is killed with SIGKILL; the second instance takes the
 * controller role (lease TTL shortened to 2 s) and resumes the engine from the books left in
 * PostgreSQL: every file arrives once, with its content, no conflicted copy appears, and the
 * receiving member's change feed records each file once (nothing done twice that a user
 * sees), and the new controller verifies the members against the books once its backlog is
 * drained (a takeover's anti-entropy: whatever the dead one left is found). Skipped with the
 * reason only where the machine has no PostgreSQL server binaries.
 *
 * It lost one file in ~1 run in 5 to 10 until the mirror booked an entry at its origin and
 * recorded its progress in one transaction: killed in between, the dead controller had moved
 * the share head to the file's version, and the next one, booking the entry again, found the
 * head already there and propagated nothing (packages/mirror/test/takeover.test.ts kills the
 * books at that step deterministically).
 *
 * Scale: FILES small files (60; WEFT_FULL=1: 300) — enough for the kill to land while the
 * engine is still copying on this machine; the test checks convergence, never timing.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { ChangesResponse, ShareInfo, ShareInviteResponse } from '@weft/wire';
import { postgresBinaries } from '../src/testing/postgres.ts';
import { startTestServer, TestClient } from './helpers.ts';
import { type SharedStorage, startSharedStorage } from './pg-shared.ts';

const bins = postgresBinaries();
const BIN = nodePath.resolve(import.meta.dirname, '../bin/weft-proxy.mjs');
const FILES = process.env.WEFT_FULL === '1' ? 300 : 60;

/** Start `weft-proxy --config file` in a child process; resolves with its URL. */
function startChild(configFile: string): Promise<{ child: ChildProcess; url: string; out: () => string }> {
  const child = spawn(process.execPath, [BIN, '--config', configFile], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  return new Promise((resolve, reject) => {
    const onData = (b: Buffer): void => {
      out += b.toString();
      const m = /weft-proxy listening on (http:\/\/\S+)/.exec(out);
      if (m?.[1]) resolve({ child, url: m[1], out: () => out });
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    child.once('exit', (code) => reject(new Error(`server exited (${code}): ${out}`)));
  });
}

/** Every change of `c`'s namespace (polling /v1/changes to the end). */
async function feed(c: TestClient): Promise<ChangesResponse['changes']> {
  const all: ChangesResponse['changes'] = [];
  for (let cursor = 0; ;) {
    const page = await c.json<ChangesResponse>('GET', `/v1/changes?cursor=${cursor}&limit=1000`);
    all.push(...page.changes);
    cursor = page.cursor;
    if (!page.hasMore) return all;
  }
}

describe.skipIf('missing' in bins)(
  `a share mirror when its controller is killed${'missing' in bins ? ` (skipped: ${bins.missing})` : ''}`,
  () => {
    let storage: SharedStorage | undefined;
    let first: Awaited<ReturnType<typeof startChild>> | undefined;
    let two: Awaited<ReturnType<typeof startTestServer>>;

    beforeAll(async () => {
      storage = await startSharedStorage('weft-pg-mirror-');
      const shared = storage.dir;
      const config = {
        ...storage.tiers,
        gcIntervalMs: 0,
        cluster: { leaseTtlMs: 2000, leaseRenewMs: 400 },
        shares: {
          enabled: true,
          pollIntervalMs: 100,
          notifyBatchMs: 50,
          key: randomBytes(32).toString('hex'),
        },
      };
      const configFile = nodePath.join(shared, 'first.json');
      await fsp.writeFile(
        configFile,
        JSON.stringify({ ...config, host: '127.0.0.1', port: 0, dataDir: nodePath.join(shared, 'first') }),
      );
      // The first to start holds the controller role, and so runs the engines.
      first = await startChild(configFile);
      two = await startTestServer(config);
    });
    afterAll(async () => {
      if (first && first.child.exitCode === null && first.child.signalCode === null)
        first.child.kill('SIGKILL');
      await two?.stop();
      await storage?.stop();
    });

    it('theNextControllerResumesTheMirrorFromThePostgresBooks_eachFileOnce', async () => {
      const ann = await TestClient.enrol(two, 'ann');
      const ben = await TestClient.enrol(two, 'ben');
      await ann.putSmall({ 'Team/seed.txt': 'seed' });
      const created = await ann.json<ShareInfo>('POST', '/v1/shares', {
        name: 'Team',
        replica: { cloud: 'weft', root: 'Team' },
      });
      const invite = await ann.json<ShareInviteResponse>('POST', `/v1/shares/${created.id}/invites`, {});
      await ben.json('POST', '/v1/shares/accept', {
        token: invite.token,
        replica: { cloud: 'weft', root: 'FromAnn' },
      });
      // The first instance's engine seeds ben; the second runs none.
      await vi.waitFor(async () => expect(await ben.text('FromAnn/seed.txt')).toBe('seed'), {
        timeout: 30_000,
        interval: 100,
      });
      expect(two.shares!.stats(created.id).applied).toBe(0);

      const files: Record<string, string> = {};
      for (let i = 0; i < FILES; i++) files[`Team/batch/f${String(i).padStart(3, '0')}.txt`] = `content ${i}`;
      await ann.putSmall(files);
      const list = async (c: TestClient, dir: string): Promise<string[]> => {
        const res = await c.req('GET', `/v1/list?path=${encodeURIComponent(dir)}&recursive=true`);
        if (res.status === 404) return [];
        const body = (await res.json()) as { entries: { path: string; kind: string }[] };
        return body.entries.map((e) => e.path).sort();
      };
      // Mid-mirror: some of the batch arrived at ben's, then the controller dies.
      let atKill = 0;
      await vi.waitFor(
        async () => {
          atKill = (await list(ben, 'FromAnn/batch')).length;
          expect(atKill).toBeGreaterThan(0);
        },
        { timeout: 60_000, interval: 10 },
      );
      first!.child.kill('SIGKILL');
      process.stderr.write(`mirror failover: controller killed with ${atKill} of ${FILES} files mirrored\n`);

      // The second instance takes the role over and finishes from the books.
      const want = Object.keys(files)
        .map((p) => p.replace(/^Team\//, 'FromAnn/'))
        .sort();
      await vi.waitFor(
        async () =>
          expect((await list(ben, 'FromAnn/batch')).filter((p) => p.endsWith('.txt'))).toEqual(want),
        {
          timeout: 60_000,
          interval: 200,
        },
      );
      expect(two.shares!.stats(created.id).applied).toBeGreaterThan(0);
      // Resumed from the books' cursors, not from a re-listing of both members' folders.
      expect(two.shares!.stats(created.id).relistings).toBe(0);
      for (const [p, content] of Object.entries(files))
        expect(await ben.text(p.replace(/^Team\//, 'FromAnn/'))).toBe(content);

      // Nothing extra on either side: no conflicted copy, nothing echoed back.
      expect(await list(ben, 'FromAnn')).toEqual(['FromAnn/batch', ...want, 'FromAnn/seed.txt'].sort());
      expect(await list(ann, 'Team')).toEqual(['Team/batch', ...Object.keys(files), 'Team/seed.txt'].sort());
      expect(two.shares!.stats(created.id).conflicts).toBe(0);
      // Each file reached ben's namespace once: one upsert per path in ben's feed.
      const upserts = new Map<string, number>();
      for (const c of await feed(ben))
        if (c.type === 'upsert' && c.path.startsWith('FromAnn/batch/'))
          upserts.set(c.path, (upserts.get(c.path) ?? 0) + 1);
      expect([...upserts.entries()].filter(([, n]) => n !== 1)).toEqual([]);
      expect(upserts.size).toBe(FILES);
      // And the share's status, read from the PostgreSQL books, shows nothing left to do.
      await vi.waitFor(
        async () => {
          const info = await ann.json<ShareInfo>('GET', `/v1/shares/${created.id}`);
          expect(info.members.map((m) => m.replica?.waiting)).toEqual([0, 0]);
        },
        { timeout: 20_000, interval: 200 },
      );
      // The takeover's verification ran and found nothing the books did not know.
      await vi.waitFor(() => expect(two.shares!.stats(created.id).verifications).toBeGreaterThan(0), {
        timeout: 20_000,
        interval: 200,
      });
      expect(two.shares!.stats(created.id).verifyFound).toBe(0);
    });
  },
);
