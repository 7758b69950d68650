/**
 * GC of abandoned transfers: abandoned means no activity (a block received, a commit attempted)
 * for the grace period, not opened longer ago than it. A slow upload of a large file outlives
 * the grace period; GC must not break it, and a commit that loses a race with GC gets a clear,
 * retryable TRANSFER_UNKNOWN, never an internal error.
 */
import { existsSync, rmSync } from 'node:fs';
import * as nodePath from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TransferState } from '@weft/wire';
import { pseudoRandom, sha, startTestServer, streamBlocks, TestClient, transferFrames } from './helpers.ts';

const HOUR = 3_600_000;
const GRACE = 24 * HOUR;
// A clock the test moves: hours pass between blocks without the test waiting for them.
let clock = Date.now();
let server: Awaited<ReturnType<typeof startTestServer>>;
let c: TestClient;

beforeAll(async () => {
  server = await startTestServer({ gcGraceMs: GRACE });
  // As versions.test.ts does: the store's clock (GC's and the transfers').
  (server.store as unknown as { now: () => number }).now = () => clock;
  c = await TestClient.enrol(server, 'slow', 'desk');
});
afterAll(async () => server.stop());

const staged = (id: string): string => nodePath.join(server.dir, 'fs', 'staging', id);

async function open(path: string, data: Buffer): Promise<TransferState> {
  return c.json<TransferState>('POST', '/v1/transfers', {
    path,
    size: data.length,
    sha256: sha(data),
    mtimeMs: 3,
  });
}

function commit(path: string, data: Buffer, transferId: string): Promise<unknown> {
  return c.ops({ op: 'commit', path, sha256: sha(data), size: data.length, mtimeMs: 3, transferId });
}

async function stateOf(id: string): Promise<[number, string | undefined]> {
  const res = await c.req('GET', `/v1/transfers/${id}`);
  return [res.status, ((await res.json()) as { error?: { code: string } }).error?.code];
}

describe('GC of transfers', () => {
  it('keepsATransferOpenedLongerAgoThanTheGraceWhileBlocksArrive', async () => {
    const data = pseudoRandom(3 * 1024, 1);
    const t = await open('slow/big.bin', data);
    const frames = transferFrames(t.transferId, data, 1024);
    // One block every 20 hours: each gap is within the grace, the whole upload is not.
    for (const f of frames) {
      clock += 20 * HOUR;
      expect((await streamBlocks(c, [f]))[0]).toMatchObject({ type: 'block-ack' });
      expect((await server.gc()).transfers).toBe(0);
    }
    expect(existsSync(staged(t.transferId))).toBe(true);
    const [r] = (await commit('slow/big.bin', data, t.transferId)) as unknown[];
    expect(r).toMatchObject({ status: 'applied' });
  });

  it('removesATransferIdlePastTheGrace', async () => {
    const data = pseudoRandom(2 * 1024, 2);
    const t = await open('slow/idle.bin', data);
    await streamBlocks(c, transferFrames(t.transferId, data, 1024).slice(0, 1));
    clock += GRACE - HOUR;
    expect((await server.gc()).transfers).toBe(0);
    clock += 2 * HOUR;
    expect((await server.gc()).transfers).toBe(1);
    expect(existsSync(staged(t.transferId))).toBe(false);
    expect(await stateOf(t.transferId)).toEqual([404, 'TRANSFER_UNKNOWN']);
    const [r] = (await commit('slow/idle.bin', data, t.transferId)) as unknown[];
    expect(r).toMatchObject({ status: 'error', error: { code: 'TRANSFER_UNKNOWN' } });
  });

  it('aCommitAttemptCountsAsActivity', async () => {
    const data = pseudoRandom(2 * 1024, 3);
    const t = await open('slow/retry.bin', data);
    await streamBlocks(c, transferFrames(t.transferId, data, 1024).slice(0, 1));
    clock += GRACE - HOUR;
    const [early] = (await commit('slow/retry.bin', data, t.transferId)) as unknown[];
    expect(early).toMatchObject({ status: 'error', error: { code: 'TRANSFER_INCOMPLETE' } });
    clock += 2 * HOUR; // past the grace since the block, not since the commit attempt
    expect((await server.gc()).transfers).toBe(0);
  });

  it('aCommitWhoseStagedBytesGCRemovedGetsARetryableError', async () => {
    // GC caught between removing the staged file and the row (or a commit between them): the
    // commit must say "open a new transfer", not fail with an internal error.
    const data = pseudoRandom(2 * 1024, 4);
    const t = await open('slow/race.bin', data);
    await streamBlocks(c, transferFrames(t.transferId, data, 1024));
    rmSync(staged(t.transferId));
    const [r] = (await commit('slow/race.bin', data, t.transferId)) as unknown[];
    expect(r).toMatchObject({ status: 'error', error: { code: 'TRANSFER_UNKNOWN' } });
    expect(await stateOf(t.transferId)).toEqual([404, 'TRANSFER_UNKNOWN']);
  });
});
