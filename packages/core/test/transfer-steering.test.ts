/**
 * Steering of a large upload's blocks (issue #18; remote/steered-blocks.ts, the code the
 * large-upload propagator sends its blocks through): the instance that opens a transfer may
 * name a less loaded one (`preferred`); the blocks go there only when the agent's pool
 * knows it as up, and the rest go to the agent's own instance, resumed from the shared
 * transfer's acknowledged ranges, when it fails. Two plain HTTP servers on loopback share
 * one transfer table, as two proxy instances on one PostgreSQL and one staging tier do (the
 * real proxies: e2e/test/agent-failover.test.ts).
 */
import { createHash } from 'node:crypto';
import { decodeTransferBlock, encodeTransferBlock, type ByteRange } from '@weft/wire';
import { afterEach, describe, expect, it } from 'vitest';
import { ProxyClient } from '../src/remote/proxy-client.ts';
import { ServerPool } from '../src/remote/server-pool.ts';
import { SteeredBlocks } from '../src/remote/steered-blocks.ts';
import { listenLoopback } from './support/loopback-server.ts';

const TRANSFER_ID = '0123456789abcdef0123456789abcdef';
const BLOCK = 1024;

/** The transfer both instances share (a row in PostgreSQL and a staging file, in a proxy). */
interface Shared {
  bytes: Buffer;
  sha256: string;
  received: ByteRange[];
  /**
   * What the POST and GET answer as `preferred` (undefined: nothing); an instance never
   * names itself, as a proxy does not.
   */
  preferred?: { id: string; url: string };
}

interface Instance {
  url: string;
  /** Blocks this instance stored. */
  blocks: number;
  /** Tokens it was sent. */
  tokens: Set<string>;
  /**
   * Fail block PUTs with 503 (a relay in trouble) from the n-th one on (1-based); the n-th
   * is stored first (acknowledged in the shared transfer, its answer lost).
   */
  failBlocksFrom?: number;
  close(): Promise<void>;
}

const running: Instance[] = [];
afterEach(async () => {
  for (const s of running.splice(0)) await s.close();
});

function state(shared: Shared, answering: string) {
  const named = shared.preferred;
  return {
    transferId: TRANSFER_ID,
    path: 'big.bin',
    size: shared.bytes.length,
    sha256: shared.sha256,
    received: shared.received,
    receivedBytes: shared.received.reduce((n, r) => n + r.length, 0),
    haveObject: false,
    maxBlockBytes: BLOCK,
    ...(named && named.url.replace(/\/+$/, '') !== answering ? { preferred: named } : {}),
  };
}

async function instance(shared: Shared): Promise<Instance> {
  const inst: Instance = { url: '', blocks: 0, tokens: new Set(), close: async () => undefined };
  let puts = 0;
  const server = await listenLoopback((req, res) => {
    inst.tokens.add(req.headers.authorization ?? '');
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => {
      const json = (status: number, body: unknown) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(body));
      };
      if (req.method === 'POST' && req.url === '/v1/transfers') return json(200, state(shared, inst.url));
      if (req.method === 'GET' && req.url === `/v1/transfers/${TRANSFER_ID}`)
        return json(200, state(shared, inst.url));
      if (req.method === 'PUT' && req.url === `/v1/transfers/${TRANSFER_ID}/blocks`) {
        puts += 1;
        const failing = inst.failBlocksFrom !== undefined && puts >= inst.failBlocksFrom;
        if (failing && puts > inst.failBlocksFrom!)
          return json(503, { error: { code: 'UNAVAILABLE', message: 'relay in trouble' } });
        const b = decodeTransferBlock(Buffer.concat(parts));
        Buffer.from(b.payload).copy(shared.bytes, b.offset);
        shared.received.push({ offset: b.offset, length: b.payload.byteLength });
        inst.blocks += 1;
        // The first failing block is stored, but its answer is lost (a 503 instead).
        if (failing) return json(503, { error: { code: 'UNAVAILABLE', message: 'relay in trouble' } });
        return json(200, {
          type: 'block-ack',
          transferId: TRANSFER_ID,
          seq: b.seq,
          offset: b.offset,
          length: b.payload.byteLength,
          receivedBytes: 0,
        });
      }
      json(404, { error: { code: 'NOT_FOUND', message: 'no route' } });
    });
  });
  inst.url = server.url;
  inst.close = server.close;
  running.push(inst);
  return inst;
}

/** An 8-block file, both instances, and a client on the first (b listed in its pool). */
async function setup() {
  const file = Buffer.from(Array.from({ length: 8 * BLOCK }, (_, i) => (i * 7 + 3) % 251));
  const shared: Shared = {
    bytes: Buffer.alloc(file.length),
    sha256: createHash('sha256').update(file).digest('hex'),
    received: [],
  };
  const a = await instance(shared);
  const b = await instance(shared);
  const pool = new ServerPool({ home: a.url, downBackoff: { baseMs: 60_000, capMs: 60_000 } });
  pool.learn([
    { url: a.url, id: 'i-a' },
    { url: b.url, id: 'i-b' },
  ]);
  const client = new ProxyClient({ baseUrl: a.url, token: 'device-token', servers: pool });
  return { file, shared, a, b, pool, client };
}

/**
 * The propagator's block loop (upload-large.ts uploadWhole), one block at a time: a new
 * transfer, or with `resume` the saved one read again (GET), sending only what it lacks;
 * `stopAfter` blocks and the agent stops (the rest is left for a resume).
 */
async function upload(client: ProxyClient, file: Buffer, how: { resume?: boolean; stopAfter?: number } = {}) {
  const st = how.resume
    ? await client.getTransfer(TRANSFER_ID)
    : await client.createTransfer({ path: 'big.bin', size: file.length, sha256: '', mtimeMs: 0 });
  if (!st) throw new Error('the transfer is gone');
  const fallbacks: string[] = [];
  const route = new SteeredBlocks(client, st, (url) => fallbacks.push(url));
  const steeredTo = route.steeredTo;
  let sent = 0;
  for (let seq = 0, offset = 0; offset < file.length; seq++, offset += BLOCK) {
    if (st.received.some((r) => r.offset <= offset && r.offset + r.length >= offset + BLOCK)) continue;
    if (sent++ === how.stopAfter) break;
    const payload = file.subarray(offset, offset + BLOCK);
    const frame = encodeTransferBlock({
      transferId: st.transferId,
      seq,
      offset,
      last: offset + BLOCK >= file.length,
      payload,
    });
    await route.put({ offset, length: payload.byteLength }, frame);
  }
  return { steeredTo, fallbacks, route };
}

const complete = (shared: Shared): boolean =>
  createHash('sha256').update(shared.bytes).digest('hex') === shared.sha256;

describe('large upload blocks steered to the preferred instance', () => {
  it('sendsBlocksToThePreferredInstanceTheAgentKnows', async () => {
    const { file, shared, a, b, client } = await setup();
    shared.preferred = { id: 'i-b', url: `${b.url}/` };
    const r = await upload(client, file);
    expect(r.steeredTo).toBe(b.url);
    expect(b.blocks).toBe(8);
    expect(a.blocks).toBe(0);
    expect(r.fallbacks).toEqual([]);
    expect(b.tokens).toEqual(new Set(['Bearer device-token']));
    expect(complete(shared)).toBe(true);
  });

  it('steersAResumedTransferLikeANewOne', async () => {
    // The first run is not steered (nothing preferred), and stops after 3 of its 8 blocks.
    const { file, shared, a, b, pool } = await setup();
    const first = new ProxyClient({ baseUrl: a.url, token: 'device-token', servers: pool });
    expect((await upload(first, file, { stopAfter: 3 })).steeredTo).toBeUndefined();
    expect(a.blocks).toBe(3);
    // After a restart the agent reads the saved transfer again; b is preferred now.
    shared.preferred = { id: 'i-b', url: b.url };
    const again = new ProxyClient({ baseUrl: a.url, token: 'device-token', servers: pool });
    const r = await upload(again, file, { resume: true });
    expect(r.steeredTo).toBe(b.url);
    expect(b.blocks).toBe(5); // only the blocks the transfer lacked
    expect(a.blocks).toBe(3);
    expect(complete(shared)).toBe(true);
  });

  it('ignoresAPreferredUrlThePoolDoesNotKnow', async () => {
    const { file, shared, a, client } = await setup();
    const stranger = await instance(shared); // up, answering, but never listed to the agent
    shared.preferred = { id: 'i-x', url: stranger.url };
    const r = await upload(client, file);
    expect(r.steeredTo).toBeUndefined();
    expect(stranger.tokens.size).toBe(0); // the device token never went there
    expect(a.blocks).toBe(8);
    expect(complete(shared)).toBe(true);
  });

  it('ignoresAPreferredInstanceThePoolHasFoundDown', async () => {
    const { file, shared, a, b, pool, client } = await setup();
    shared.preferred = { id: 'i-b', url: b.url };
    pool.failed(b.url, 'unreachable');
    const r = await upload(client, file);
    expect(r.steeredTo).toBeUndefined();
    expect(b.tokens.size).toBe(0);
    expect(a.blocks).toBe(8);
  });

  it('fallsBackToItsOwnInstanceAndResumesFromTheAcknowledgedRanges', async () => {
    const { file, shared, a, b, client } = await setup();
    shared.preferred = { id: 'i-b', url: b.url };
    b.failBlocksFrom = 4; // four blocks land on b, the 4th answered 503
    const r = await upload(client, file);
    expect(r.steeredTo).toBe(b.url);
    expect(r.fallbacks).toEqual([b.url]);
    expect(r.route.steeredBlocks).toBe(3);
    expect(b.blocks).toBe(4);
    expect(a.blocks).toBe(4); // only what the shared transfer had not acknowledged
    expect(complete(shared)).toBe(true);
  });

  it('fallsBackWhenThePreferredInstanceIsGone', async () => {
    const { file, shared, a, b, pool, client } = await setup();
    shared.preferred = { id: 'i-b', url: b.url };
    const st = await client.createTransfer({ path: 'big.bin', size: file.length, sha256: '', mtimeMs: 0 });
    const route = new SteeredBlocks(client, st);
    expect(route.steeredTo).toBe(b.url);
    await b.close();
    for (let seq = 0, offset = 0; offset < file.length; seq++, offset += BLOCK) {
      const payload = file.subarray(offset, offset + BLOCK);
      const last = offset + BLOCK >= file.length;
      const frame = encodeTransferBlock({ transferId: TRANSFER_ID, seq, offset, last, payload });
      await route.put({ offset, length: payload.byteLength }, frame);
    }
    expect(route.steeredTo).toBeUndefined();
    expect(a.blocks).toBe(8);
    expect(complete(shared)).toBe(true);
    expect(pool.current).toBe(a.url); // the agent stays on its own instance
    expect(pool.view().find((v) => v.url === b.url)?.up).toBe(false); // and steers there no more
  });
});
