/**
 * Resource exhaustion by a remote client holding a valid device token (issue #14): a tiny
 * delta that asks for a huge output, a transfer or delta that declares an absurd size, a
 * block far past the end of its file, and bodies that trickle in forever. Each is refused
 * with a clear error, bounded in what it makes the server write, and leaves nothing behind.
 */
import { readFileSync } from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as net from 'node:net';
import * as nodePath from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeDeltaContainer, encodeTransferBlock, type OpResult, type TransferState } from '@weft/wire';
import {
  pseudoRandom,
  sha,
  startTestServer,
  streamBlocks,
  TestClient,
  uploadLarge as uploadTo,
} from './helpers.ts';

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;

/** Bytes this process has passed to write(2) so far (Linux /proc/self/io `wchar`). */
function bytesWritten(): number {
  const m = /^wchar:\s+(\d+)$/m.exec(readFileSync('/proc/self/io', 'utf8'));
  return Number(m?.[1] ?? NaN);
}

function varint(n: number): number[] {
  const out: number[] = [];
  do {
    let b = n % 128;
    n = Math.floor(n / 128);
    if (n > 0) b |= 0x80;
    out.push(b);
  } while (n > 0);
  return out;
}

/**
 * An rsync-wasm delta of exactly `deltaBytes` bytes that copies the whole old file again
 * and again (each COPY jumps back to offset 0), and what it would produce.
 */
function amplifyingDelta(oldLength: number, deltaBytes: number): { delta: Uint8Array; output: number } {
  const h = new Uint8Array(24);
  h.set([0x57, 0x46, 0x54, 0x44, 1, 0, 0, 0]);
  new DataView(h.buffer).setUint32(8, 4096, true);
  new DataView(h.buffer).setBigUint64(16, BigInt(oldLength), true);
  const out = [...h, 0x02, 0x00, ...varint(oldLength)];
  const again = [0x02, ...varint(2 * oldLength - 1), ...varint(oldLength)];
  let produced = oldLength;
  while (out.length + again.length + 10 + 3 <= deltaBytes) {
    out.push(...again);
    produced += oldLength;
  }
  const pad = deltaBytes - out.length - 2 - (1 + varint(produced + 200).length);
  out.push(0x01, ...varint(pad), ...new Array<number>(pad).fill(0x41));
  produced += pad;
  out.push(0x00, ...varint(produced));
  return { delta: Uint8Array.from(out), output: produced };
}

async function errorOf(res: Response): Promise<{ status: number; code?: string; message?: string }> {
  const body = (await res.json()) as { error?: { code?: string; message?: string } };
  return { status: res.status, code: body.error?.code, message: body.error?.message };
}

async function stagingLeftovers(dir: string): Promise<string[]> {
  return (await fsp.readdir(nodePath.join(dir, 'fs', 'staging')).catch(() => [])).filter((n) =>
    n.startsWith('tmp-'),
  );
}

let server: Awaited<ReturnType<typeof startTestServer>>;
let c: TestClient;

function uploadLarge(path: string, data: Buffer): Promise<OpResult> {
  return uploadTo(c, path, data);
}

beforeAll(async () => {
  server = await startTestServer({ smallFileBytes: 64 * 1024, maxFileBytes: 8 * MiB });
  c = await TestClient.enrol(server, 'limits', 'attacker');
});
afterAll(async () => {
  await server?.stop();
});

describe('delta amplification', () => {
  it('refuses a 490-byte delta that repeats its base past the declared size, having written at most that size', async () => {
    const base = pseudoRandom(2_000_000, 11);
    const r = await uploadLarge('amp/base.bin', base);
    expect(r.status).toBe('applied');
    const rev = r.status === 'applied' ? r.entry?.revision : undefined;
    const { delta, output } = amplifyingDelta(base.length, 490);
    expect(delta.byteLength).toBe(490);
    expect(output).toBeGreaterThan(100_000_000);
    const declared = 1000;
    const container = encodeDeltaContainer({
      baseSha256: sha(base),
      targetSha256: sha('whatever'),
      targetSize: declared,
      delta,
    });
    // A full read stages the base in the relay cache first, so what is measured below is the
    // patch output alone.
    expect(sha(await c.bytes('amp/base.bin'))).toBe(sha(base));
    const before = bytesWritten();
    const res = await c.req(
      'POST',
      `/v1/deltas?path=amp%2Fbase.bin&baseRevision=${rev}&mtimeMs=2`,
      container,
    );
    const written = bytesWritten() - before;
    const e = await errorOf(res);
    expect(e.code).toBe('INVALID_FORMAT');
    expect(e.message).toMatch(/OUTPUT_TOO_LARGE|exceeds the limit/);
    // The declared size plus one output buffer (256 KiB), plus slack for the response and logs.
    expect(written).toBeLessThan(declared + 256 * 1024 + 64 * 1024);
    expect(await stagingLeftovers(server.dir)).toEqual([]);
    expect(sha(await c.bytes('amp/base.bin'))).toBe(sha(base));
  });
});

describe('declared sizes', () => {
  it('refuses a transfer larger than maxFileBytes with FILE_TOO_LARGE and creates nothing', async () => {
    const stagingBefore = await fsp.readdir(nodePath.join(server.dir, 'fs', 'staging'));
    const res = await c.req('POST', '/v1/transfers', {
      path: 'huge.bin',
      size: 1024 * GiB,
      sha256: sha('x'),
      mtimeMs: 1,
    });
    const e = await errorOf(res);
    expect(e).toMatchObject({ status: 413, code: 'FILE_TOO_LARGE' });
    expect(e.message).toContain(String(8 * MiB));
    expect(await fsp.readdir(nodePath.join(server.dir, 'fs', 'staging'))).toEqual(stagingBefore);
    // Exactly the maximum is accepted.
    const ok = await c.req('POST', '/v1/transfers', {
      path: 'max.bin',
      size: 8 * MiB,
      sha256: sha('y'),
      mtimeMs: 1,
    });
    expect(ok.status).toBe(201);
  });

  it('refuses a block whose offset + length passes the declared size, without growing the staging file', async () => {
    const t = await c.json<TransferState>('POST', '/v1/transfers', {
      path: 'small-declared.bin',
      size: 100_000,
      sha256: sha('z'),
      mtimeMs: 1,
    });
    const staged = nodePath.join(server.dir, 'fs', 'staging', t.transferId);
    for (const offset of [1024 * GiB, 100_000, 99_999]) {
      const res = await c.req(
        'PUT',
        `/v1/transfers/${t.transferId}/blocks`,
        encodeTransferBlock({
          transferId: t.transferId,
          seq: 1,
          offset,
          last: true,
          payload: pseudoRandom(2, 1),
        }),
      );
      expect(await errorOf(res)).toMatchObject({ status: 400, code: 'BAD_REQUEST' });
    }
    const st = await fsp.stat(staged);
    expect(st.size).toBe(0);
    expect(st.blocks).toBe(0);
    const state = await c.json<TransferState>('GET', `/v1/transfers/${t.transferId}`);
    expect(state.receivedBytes).toBe(0);
  });

  it('refuses a delta whose declared target size passes maxFileBytes before reading it', async () => {
    const base = pseudoRandom(100_000, 12);
    const r = await uploadLarge('amp/declared.bin', base);
    const rev = r.status === 'applied' ? r.entry?.revision : undefined;
    const { delta } = amplifyingDelta(base.length, 200);
    const container = encodeDeltaContainer({
      baseSha256: sha(base),
      targetSha256: sha('whatever'),
      targetSize: 8 * MiB + 1,
      delta,
    });
    const before = bytesWritten();
    const res = await c.req(
      'POST',
      `/v1/deltas?path=amp%2Fdeclared.bin&baseRevision=${rev}&mtimeMs=2`,
      container,
    );
    expect(await errorOf(res)).toMatchObject({ status: 413, code: 'FILE_TOO_LARGE' });
    expect(bytesWritten() - before).toBeLessThan(64 * 1024);
    expect(await stagingLeftovers(server.dir)).toEqual([]);
  });
});

describe('relay reads', () => {
  it('serves a Range read of a large object from the object tier without staging the whole object', async () => {
    const data = pseudoRandom(3 * MiB + 17, 13);
    expect((await uploadLarge('relay/range.bin', data)).status).toBe('applied');
    const relay = server.store.relay;
    expect(await relay.has(sha(data))).toBe(false);
    const misses = relay.stats.misses;
    const res = await c.req('GET', '/v1/files?path=relay%2Frange.bin', undefined, {
      range: 'bytes=2000000-2000099',
    });
    expect(res.status).toBe(206);
    expect(res.headers.get('content-range')).toBe(`bytes 2000000-2000099/${data.length}`);
    expect(Buffer.from(await res.arrayBuffer()).equals(data.subarray(2_000_000, 2_000_100))).toBe(true);
    expect(await relay.has(sha(data))).toBe(false);
    expect(relay.stats.misses).toBe(misses);
    const relayDir = nodePath.join(server.dir, 'fs', 'relay');
    expect((await fsp.readdir(relayDir)).filter((n) => n.includes(sha(data)))).toEqual([]);
    // A whole-file read still goes through the relay cache.
    expect(sha(await c.bytes('relay/range.bin'))).toBe(sha(data));
    expect(await relay.has(sha(data))).toBe(true);
  });
});

describe('slow clients', () => {
  let slow: Awaited<ReturnType<typeof startTestServer>>;
  let sc: TestClient;
  const host = (): { host: string; port: number } => {
    const u = new URL(slow.url);
    return { host: u.hostname, port: Number(u.port) };
  };
  /** A raw connection; resolves `closed` when the server closes it. */
  const connect = async (): Promise<{ socket: net.Socket; closed: Promise<number> }> => {
    const socket = net.connect(host());
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', resolve);
      socket.once('error', reject);
    });
    socket.on('error', () => undefined);
    socket.resume(); // read (and drop) whatever the server sends, unless a test pauses it
    const started = Date.now();
    const closed = new Promise<number>((resolve) =>
      socket.once('close', () => resolve(Date.now() - started)),
    );
    return { socket, closed };
  };
  const connections = (): Promise<number> =>
    new Promise((resolve, reject) =>
      slow.app.server.getConnections((err, n) => (err ? reject(err) : resolve(n))),
    );
  const within = <T>(p: Promise<T>, ms: number, what: string): Promise<T> =>
    Promise.race([
      p,
      new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms)),
    ]);

  beforeAll(async () => {
    slow = await startTestServer({
      timeouts: { idleMs: 1500, headersMs: 600, bodyMs: 600, bodyMinBytesPerSecond: 1000 },
    });
    sc = await TestClient.enrol(slow, 'slow', 'dev');
  });
  afterAll(async () => {
    await slow?.stop();
  });

  it('cuts 200 connections trickling a body, stays responsive meanwhile, and frees their slots', async () => {
    const before = await connections();
    const clients = await Promise.all(Array.from({ length: 200 }, () => connect()));
    const head =
      `POST /v1/ops HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${sc.token}\r\n` +
      'Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{';
    for (const { socket } of clients) socket.write(head);
    const trickle = setInterval(() => {
      for (const { socket } of clients) if (!socket.destroyed) socket.write(' ');
    }, 100);
    try {
      // Responsive while they trickle.
      const health = await within(fetch(`${slow.url}/healthz`), 1000, 'healthz');
      expect(health.status).toBe(200);
      const took = await within(Promise.all(clients.map((c) => c.closed)), 5000, 'slow bodies cut');
      expect(Math.max(...took)).toBeGreaterThanOrEqual(500);
    } finally {
      clearInterval(trickle);
    }
    await new Promise((r) => setTimeout(r, 50));
    expect(await connections()).toBeLessThanOrEqual(before);
    expect((await fetch(`${slow.url}/healthz`)).status).toBe(200);
  });

  it('cuts a connection trickling its headers', async () => {
    const { socket, closed } = await connect();
    socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n');
    const trickle = setInterval(() => socket.destroyed || socket.write('X'), 100);
    try {
      expect(await within(closed, 4000, 'slow headers cut')).toBeGreaterThanOrEqual(500);
    } finally {
      clearInterval(trickle);
    }
  });

  it('closes a connection that sends nothing after idleMs', async () => {
    const { closed } = await connect();
    expect(await within(closed, 5000, 'idle connection closed')).toBeGreaterThanOrEqual(1400);
  });

  it('closes a connection that does not read its response', async () => {
    const data = pseudoRandom(24 * MiB, 17);
    const t = await sc.json<TransferState>('POST', '/v1/transfers', {
      path: 'unread.bin',
      size: data.length,
      sha256: sha(data),
      mtimeMs: 1,
    });
    const frames: Uint8Array[] = [];
    for (let off = 0, seq = 0; off < data.length; off += 4 * MiB, seq++)
      frames.push(
        encodeTransferBlock({
          transferId: t.transferId,
          seq,
          offset: off,
          last: off + 4 * MiB >= data.length,
          payload: data.subarray(off, off + 4 * MiB),
        }),
      );
    await streamBlocks(sc, frames);
    const [r] = await sc.ops({
      op: 'commit',
      path: 'unread.bin',
      sha256: sha(data),
      size: data.length,
      mtimeMs: 1,
      transferId: t.transferId,
    });
    expect(r?.status).toBe('applied');
    const { socket, closed } = await connect();
    socket.pause();
    let received = 0;
    socket.on('data', (b: Buffer) => (received += b.byteLength));
    socket.write(
      `GET /v1/files?path=unread.bin HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${sc.token}\r\n\r\n`,
    );
    // The client reads nothing for twice idleMs, then everything: the server has given up by then.
    await new Promise((resolve) => setTimeout(resolve, 3000));
    socket.resume();
    await within(closed, 5000, 'unread response cut');
    expect(received).toBeLessThan(data.length);
  });

  it('keeps a fast upload whose body outgrows the initial allowance, and an idle feed socket', async () => {
    const ws = sc.ws('/v1/feed?cursor=0');
    let wsClosed = false;
    ws.on('close', () => (wsClosed = true));
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    const t = await sc.json<TransferState>('POST', '/v1/transfers', {
      path: 'fast.bin',
      size: 4 * MiB,
      sha256: sha('fast'),
      mtimeMs: 1,
    });
    const payload = pseudoRandom(4 * MiB, 5);
    const res = await sc.req(
      'PUT',
      `/v1/transfers/${t.transferId}/blocks`,
      encodeTransferBlock({ transferId: t.transferId, seq: 0, offset: 0, last: true, payload }),
    );
    expect(res.status).toBe(200);
    await new Promise((r) => setTimeout(r, 2500));
    expect(wsClosed).toBe(false);
    ws.close();
  });
});
