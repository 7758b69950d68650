/**
 * User A cannot read, list, write or learn of user B's files through any endpoint: every
 * answer A gets about B's paths is the same as for a path that exists nowhere.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  decodeBundle,
  encodeTransferBlock,
  type ChangesResponse,
  type ListResponse,
  type MerkleResponse,
  type TransferState,
} from '@weft/wire';
import { collect, signature } from '@weft/rsync-wasm';
import { pseudoRandom, readFeed, sha, startTestServer, streamBlocks, TestClient } from './helpers.ts';

let server: Awaited<ReturnType<typeof startTestServer>>;
let a: TestClient;
let b: TestClient;
let bTransfer: TransferState;
const big = pseudoRandom(3 * 1024 * 1024, 7);

beforeAll(async () => {
  server = await startTestServer({ smallFileBytes: 1024 * 1024 });
  a = await TestClient.enrol(server, 'usera', 'a-dev');
  b = await TestClient.enrol(server, 'userb', 'b-dev');
  await b.putSmall({ 'secret/plan.txt': 'B only', 'top.txt': 'B top' });
  bTransfer = await b.json<TransferState>('POST', '/v1/transfers', {
    path: 'secret/big.bin',
    size: big.length,
    sha256: sha(big),
    mtimeMs: 1,
  });
});
afterAll(async () => server.stop());

async function status(r: Promise<Response>): Promise<[number, string]> {
  const res = await r;
  const body = await res.text();
  const code = body.startsWith('{')
    ? ((JSON.parse(body) as { error?: { code: string } }).error?.code ?? 'OK')
    : 'BINARY';
  return [res.status, code];
}

describe('namespace confinement', () => {
  it('aSeesNothingOfB', async () => {
    const list = await a.json<ListResponse>('GET', '/v1/list?path=&recursive=1');
    expect(list.entries).toEqual([]);
    expect(await status(a.req('GET', '/v1/list?path=secret'))).toEqual(
      await status(a.req('GET', '/v1/list?path=nowhere')),
    );
    expect(await status(a.req('GET', '/v1/stat?path=top.txt'))).toEqual([404, 'NOT_FOUND']);
    expect(await status(a.get('secret/plan.txt'))).toEqual(await status(a.get('nowhere/plan.txt')));
    const changes = await a.json<ChangesResponse>('GET', '/v1/changes?cursor=0');
    expect(changes.changes).toEqual([]);
    const merkle = await a.json<MerkleResponse>('POST', '/v1/merkle', { paths: ['', 'secret', 'top.txt'] });
    expect(merkle.nodes[0]?.children).toEqual([]);
    expect(merkle.nodes[1]).toEqual({ path: 'secret' });
    expect(merkle.nodes[2]).toEqual({ path: 'top.txt' });
    const dl = await a.req('POST', '/v1/bundles/download', { paths: ['top.txt', 'secret/plan.txt'] });
    const answer = decodeBundle(new Uint8Array(await dl.arrayBuffer()));
    expect(answer.entries).toEqual([]);
    expect(answer.deferred).toEqual([
      { index: 0, reason: 'absent' },
      { index: 1, reason: 'absent' },
    ]);
    const sig = await collect(signature(new Uint8Array(10), { blockSize: 16 }));
    expect(await status(a.req('POST', `/v1/files/delta?path=top.txt&baseSha256=${sha('x')}`, sig))).toEqual([
      404,
      'NOT_FOUND',
    ]);
  });

  it('aCannotTouchBsTransfersOrWriteIntoB', async () => {
    expect(await status(a.req('GET', `/v1/transfers/${bTransfer.transferId}`))).toEqual([
      404,
      'TRANSFER_UNKNOWN',
    ]);
    expect(await status(a.req('DELETE', `/v1/transfers/${bTransfer.transferId}`))).toEqual([
      404,
      'TRANSFER_UNKNOWN',
    ]);
    const frame = encodeTransferBlock({
      transferId: bTransfer.transferId,
      seq: 0,
      offset: 0,
      last: false,
      payload: big.subarray(0, 1000),
    });
    expect(await status(a.req('PUT', `/v1/transfers/${bTransfer.transferId}/blocks`, frame))).toEqual([
      404,
      'TRANSFER_UNKNOWN',
    ]);
    const [reply] = await streamBlocks(a, [frame]);
    expect(reply).toMatchObject({ type: 'block-error', error: { code: 'TRANSFER_UNKNOWN' } });
    const [commit] = await a.ops({
      op: 'commit',
      path: 'stolen.bin',
      sha256: sha(big),
      size: big.length,
      mtimeMs: 1,
      transferId: bTransfer.transferId,
    });
    expect(commit).toMatchObject({ status: 'error', error: { code: 'TRANSFER_UNKNOWN' } });
    // Paths cannot climb out of the namespace.
    for (const p of ['../userb/top.txt', '..', 'a/../../userb', '/ns/userb/top.txt']) {
      expect((await a.req('GET', `/v1/files?path=${encodeURIComponent(p)}`)).status).toBe(400);
      const r = await a.req('POST', '/v1/ops', { ops: [{ op: 'delete', path: p }] });
      expect(r.status).toBe(400);
    }
    // A's writes land in A's namespace only.
    await a.putSmall({ 'top.txt': 'A top' });
    expect(await b.text('top.txt')).toBe('B top');
    expect(await a.text('top.txt')).toBe('A top');
    await a.ops({ op: 'delete', path: 'secret' }, { op: 'move', from: 'top.txt', to: 'secret/plan.txt' });
    expect(await b.text('secret/plan.txt')).toBe('B only');
  });

  it('aDoesNotLearnOfBsObjects', async () => {
    // Deduplication is global, but a commit without content must not reveal that B has it.
    const [r] = await a.ops({
      op: 'commit',
      path: 'probe.bin',
      sha256: sha(big),
      size: big.length,
      mtimeMs: 1,
    });
    expect(r).toMatchObject({ status: 'error', error: { code: 'OBJECT_UNKNOWN' } });
  });

  it('feedsAreSeparate', async () => {
    const all = await a.json<ChangesResponse>('GET', '/v1/changes?cursor=0');
    const { changes } = await readFeed(a, 0, (c) => c.length >= all.changes.length);
    expect(changes).toEqual(all.changes);
    const hashes = changes.map((c) => (c.type === 'delete' ? undefined : c.entry.sha256));
    expect(hashes).not.toContain(sha('B only'));
    expect(hashes).not.toContain(sha('B top'));
    const { messages } = await readFeed(b, 0, (c) => c.length >= 1);
    expect(messages[0]).toMatchObject({ type: 'hello', user: 'userb' });
  });
});
