/**
 * The in-memory proxy (`@weft/core/testing`, the server of the engine harness) and a real
 * proxy must answer the engine's calls alike, or the harness tests an engine against a
 * server that does not exist. One script of RemoteStore calls — conditional writes,
 * conflicted copies, stale deletes, moves, folders in the way, bundles both ways, large
 * transfers with resumable blocks and content the server holds, signatures, deltas both
 * ways, the change feed with cursors and reset, Merkle nodes, errors — runs against each;
 * the two transcripts (times and ids masked) must be equal.
 */
import { randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { type ListPageRequest, ProxyClient, type RemoteStore, RemoteError } from '@weft/core';
import { MemoryServer } from '@weft/core/testing';
import { type RunningProxyServer, startProxyServer } from '@weft/proxy-server';
import { delta as rsyncDelta, signature as rsyncSignature, collect } from '@weft/rsync-wasm';
import {
  type FeedServerMessage,
  type ListResponse,
  encodeBundle,
  encodeDeltaContainer,
  encodeTransferBlock,
  sha256Hex,
} from '@weft/wire';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const SMALL = 1024;
const utf8 = new TextEncoder();

function bytes(n: number, seed: number): Uint8Array {
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i++) out[i] = (i * 31 + seed * 7 + (i >> 8)) & 0xff;
  return out;
}

/** Outcome of one call: its value, or the error code it failed with. */
async function outcome<T>(call: () => Promise<T>): Promise<unknown> {
  try {
    return { ok: await call() };
  } catch (e) {
    if (e instanceof RemoteError) return { error: e.code, status: e.status };
    throw e;
  }
}

async function readAll(body: AsyncIterable<Uint8Array>): Promise<string> {
  const parts: Uint8Array[] = [];
  for await (const c of body) parts.push(c);
  return sha256Hex(Buffer.concat(parts));
}

/** Every call of the script, in order, with what it answered. */
async function transcript(store: RemoteStore): Promise<unknown[]> {
  const t: unknown[] = [];
  const step = async (name: string, call: () => Promise<unknown>): Promise<void> => {
    t.push([name, await outcome(call)]);
  };
  const file = (path: string, text: string, rev?: string | null) => {
    const content = utf8.encode(text);
    return { path, rev, mtimeMs: 1000, sha256: sha256Hex(content), content };
  };

  // Bundles: parents created, revisions, the same content again is a no-op.
  await step('bundle', () =>
    store.uploadBundle(
      encodeBundle([
        file('docs/a.txt', 'one', null),
        file('docs/deep/b.txt', 'two', null),
        file('c.txt', 'c'),
      ]),
    ),
  );
  await step('same content again', () => store.uploadBundle(encodeBundle([file('c.txt', 'c', 'r99')])));
  await step('list', () => store.list('', true));
  await step('list one level', () => store.list('docs', false));
  await step('list a file', () => store.list('c.txt', false));
  await step('list missing', () => store.list('nope', true));
  // Paged (issue #16): a keyset page, the next one with the first's seq, a folder's pages.
  const page = (path: string, req: ListPageRequest): Promise<unknown> =>
    store.listPage ? store.listPage(path, req) : Promise.reject(new Error('listPage missing'));
  await step('list a page', () => page('', { limit: 2 }));
  await step('list the next page', async () => {
    const first = (await page('', { limit: 2 })) as ListResponse;
    return page('', { limit: 2, seq: first.seq, ...(first.next ? { after: first.next } : {}) });
  });
  await step('list a page of a folder', () => page('docs', { limit: 5 }));
  await step('list a page of a missing folder', () => page('nope', { limit: 2 }));
  await step('list a page of a file', () => page('c.txt', { limit: 2 }));
  await step('stat', () => store.stat('docs/a.txt'));
  await step('stat missing', () => store.stat('missing.txt'));
  // Conditional writes.
  const aRev = (await store.stat('docs/a.txt'))?.revision ?? '';
  await step('edit at its base', () =>
    store.uploadBundle(encodeBundle([file('docs/a.txt', 'one v2', aRev)])),
  );
  await step('edit at a stale base', () =>
    store.uploadBundle(encodeBundle([file('docs/a.txt', 'one v3', 'r1')])),
  );
  await step('create where a file is', () =>
    store.uploadBundle(encodeBundle([file('c.txt', 'other c', null)])),
  );
  await step('file where a folder is', () => store.uploadBundle(encodeBundle([file('docs', 'x')])));
  await step('folder where a file is', () => store.uploadBundle(encodeBundle([file('c.txt/inner', 'x')])));
  await step('bad name', () => store.uploadBundle(encodeBundle([file('bell\u0007.txt', 'x')])));
  // Ops.
  await step('ops', () =>
    store.ops([
      { op: 'mkdir', path: 'empty/inner' },
      { op: 'mkdir', path: 'empty/inner' },
      { op: 'mkdir', path: 'c.txt' },
      { op: 'delete', path: 'docs/a.txt', baseRevision: 'r1' },
      { op: 'delete', path: 'never-was.txt' },
      { op: 'move', from: 'docs/deep', to: 'moved/deeper' },
      { op: 'move', from: 'gone', to: 'x' },
      { op: 'move', from: 'c.txt', to: 'empty' },
      { op: 'move', from: 'moved', to: 'moved/inside' },
      { op: 'copy', from: 'moved', to: 'copied' },
      { op: 'delete', path: 'copied' },
    ]),
  );
  await step('stat moved', () => store.stat('moved/deeper/b.txt'));
  // Bundles down: entries and every deferred reason.
  const big = bytes(5000, 1);
  await step('large in a bundle', () =>
    store.uploadBundle(
      encodeBundle([{ path: 'big.bin', rev: null, mtimeMs: 2000, sha256: sha256Hex(big), content: big }]),
    ),
  );
  await step('bundle down', async () => {
    const r = await store.downloadBundle(
      ['c.txt', 'moved/deeper/b.txt', 'big.bin', 'empty', 'nothing.txt'],
      false,
    );
    return {
      entries: r.bundle.entries.map((e) => ({ path: e.path, rev: e.rev, sha256: e.sha256 })),
      deferred: r.deferred,
    };
  });
  await step('download', async () => {
    const d = await store.download('moved/deeper/b.txt');
    return { ...d, body: await readAll(d.body) };
  });
  await step('download a folder', () => store.download('empty'));
  await step('download missing', () => store.download('nothing.txt'));
  // Large files: a transfer in blocks, resumed; the same content again needs no block.
  const large = bytes(70_000, 2);
  const sha = sha256Hex(large);
  const opened = await store.createTransfer({
    path: 'video.bin',
    size: large.byteLength,
    sha256: sha,
    mtimeMs: 3000,
  });
  const id = opened.transferId;
  const mask = (s: unknown): unknown => JSON.parse(JSON.stringify(s).replaceAll(id, 'ID'));
  t.push(['transfer', mask(opened)]);
  await step('block 1', async () =>
    mask(
      await store.putBlock(
        id,
        encodeTransferBlock({
          transferId: id,
          seq: 1,
          offset: 40_000,
          last: true,
          payload: large.subarray(40_000),
        }),
      ),
    ),
  );
  await step('commit too early', () =>
    store.ops([
      { op: 'commit', path: 'video.bin', sha256: sha, size: large.byteLength, mtimeMs: 3000, transferId: id },
    ]),
  );
  t.push(['resume', mask(await store.getTransfer(id))]);
  await step('block 0', async () =>
    mask(
      await store.putBlock(
        id,
        encodeTransferBlock({
          transferId: id,
          seq: 0,
          offset: 0,
          last: false,
          payload: large.subarray(0, 40_000),
        }),
      ),
    ),
  );
  await step('block beyond', () =>
    store.putBlock(
      id,
      encodeTransferBlock({ transferId: id, seq: 2, offset: 69_999, last: true, payload: bytes(10, 3) }),
    ),
  );
  await step('commit', () =>
    store.ops([
      {
        op: 'commit',
        path: 'video.bin',
        sha256: sha,
        size: large.byteLength,
        mtimeMs: 3000,
        transferId: id,
        baseRevision: null,
      },
    ]),
  );
  await step('transfer gone', () => store.getTransfer(id));
  await step('held content', async () => {
    const again = await store.createTransfer({
      path: 'copy.bin',
      size: large.byteLength,
      sha256: sha,
      mtimeMs: 4000,
    });
    return { haveObject: again.haveObject, received: again.received };
  });
  await step('link held content', () =>
    store.ops([{ op: 'commit', path: 'copy.bin', sha256: sha, size: large.byteLength, mtimeMs: 4000 }]),
  );
  await step('link unknown content', () =>
    store.ops([{ op: 'commit', path: 'nope.bin', sha256: sha256Hex(bytes(9, 9)), size: 9, mtimeMs: 1 }]),
  );
  // Signatures and deltas.
  await step('signature of a small file', () => store.signature('c.txt'));
  await step('signature', async () => {
    const s = await store.signature('video.bin');
    return { sha256: s.sha256, revision: s.revision, bytes: sha256Hex(s.bytes) };
  });
  const edited = Buffer.concat([large.subarray(0, 30_000), utf8.encode('EDIT'), large.subarray(30_004)]);
  const sig = await collect(rsyncSignature(large, { blockSize: 2048 }));
  const deltaBytes = await collect(rsyncDelta(sig, edited));
  const target = { targetSha256: sha256Hex(edited), targetSize: edited.byteLength, delta: deltaBytes };
  const container = encodeDeltaContainer({ baseSha256: sha, ...target }, { compress: true });
  const rev = ((await store.stat('video.bin'))?.revision ?? '') as string;
  await step('delta up', () => store.uploadDelta('video.bin', rev, 5000, container));
  await step('delta up, stale base', () => store.uploadDelta('video.bin', rev, 5000, container));
  await step('delta up, unknown base', () =>
    store.uploadDelta(
      'other.bin',
      'r1',
      5000,
      encodeDeltaContainer({ baseSha256: sha256Hex(bytes(3, 3)), ...target }),
    ),
  );
  await step('delta down', async () => {
    const c = await store.downloadDelta('video.bin', sha, sig);
    return { base: c.baseSha256, target: c.targetSha256, size: c.targetSize };
  });
  await step('delta down, bad signature', () =>
    store.downloadDelta('video.bin', sha, utf8.encode('not a signature')),
  );
  // The feed: pages after a cursor, reset past the end, device names on records.
  await step('changes', async () => {
    const all = [];
    for (let cursor = 0; ;) {
      const page = await store.changes(cursor, 7);
      all.push(
        ...page.changes.map((c) => ({
          ...c,
          ...('entry' in c ? { entry: { ...c.entry, mtimeMs: 0 } } : {}),
        })),
      );
      cursor = page.cursor;
      if (!page.hasMore) break;
    }
    return all.map((c) => ({ ...c, device: c.device === undefined ? undefined : 'DEV' }));
  });
  await step('changes past the end', () => store.changes(10_000));
  await step('feed', async () => {
    const got: FeedServerMessage[] = [];
    await new Promise<void>((resolve, reject) => {
      const feed = store.openFeed(
        3,
        (m) => {
          got.push(m);
          if (m.type === 'changes' && m.cursor >= 5) {
            feed.dispose();
            resolve();
          }
        },
        (why) => reject(new Error(why)),
      );
      setTimeout(() => reject(new Error('no feed message')), 10_000).unref();
    });
    return got.map((m) => (m.type === 'changes' ? { type: m.type, first: m.changes[0]?.seq } : m));
  });
  await step('merkle', () => store.merkle(['moved', 'moved/deeper/b.txt', 'nothing', 'empty']));
  // Names with a conflict stamp (the time) are in the root's hash: compare its children's names.
  await step('merkle root', async () => {
    const [root] = await store.merkle(['']);
    return root?.children?.map((c) => [c.name, c.kind]);
  });
  return t;
}

/** Times (mtimes of folders, conflict-copy stamps) differ between runs: mask them. */
function normalise(t: unknown[]): unknown {
  return JSON.parse(
    JSON.stringify(t)
      .replace(/conflicted copy \d{4}-\d{2}-\d{2} \d{6}/g, 'conflicted copy STAMP')
      .replace(/"mtimeMs":\d+/g, '"mtimeMs":0'),
  );
}

describe('RemoteStore contract: the in-memory proxy answers as a real one', () => {
  let proxy: RunningProxyServer;
  let dataDir: string;
  beforeAll(async () => {
    dataDir = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-contract-'));
    proxy = await startProxyServer({
      dataDir,
      port: 0,
      adminToken: randomBytes(24).toString('hex'),
      logLevel: 'warn',
      smallFileBytes: SMALL,
    });
  });
  afterAll(async () => {
    await proxy?.close();
    await fsp.rm(dataDir, { recursive: true, force: true });
  });

  it('the same script gets the same answers', async () => {
    const { token } = await ProxyClient.enrol(proxy.url, {
      user: 'alice',
      deviceName: 'laptop',
      adminToken: proxy.adminToken,
    });
    const real = normalise(await transcript(new ProxyClient({ baseUrl: proxy.url, token })));
    const memory = normalise(
      await transcript(new MemoryServer({ smallFileBytes: SMALL }).connect('alice', 'laptop')),
    );
    expect(memory).toEqual(real);
  });
});
