import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CostResponse, type TransferState } from '@weft/wire';
import {
  pseudoRandom,
  sha,
  startTestServer,
  streamBlocks,
  TestClient,
  transferFrames,
  uploadLarge,
} from './helpers.ts';

type Server = Awaited<ReturnType<typeof startTestServer>>;

/** The value of one sample of the server's Prometheus text, 0 when absent. */
export async function metric(server: { url: string }, name: string, labels: string): Promise<number> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const prefix = labels ? `${name}{${labels}}` : `${name} `;
  const line = text.split('\n').find((l) => l.startsWith(prefix));
  return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : 0;
}

const CLIENT_IN = 'tier="client",direction="in"';

describe('weft_bytes_total: bytes from clients', () => {
  let server: Server;
  let c: TestClient;
  beforeAll(async () => {
    server = await startTestServer({ smallFileBytes: 1024 });
    c = await TestClient.enrol(server, 'alice');
  });
  afterAll(async () => server.stop());

  const open = (data: Buffer, path: string) =>
    c.json<TransferState>('POST', '/v1/transfers', {
      path,
      size: data.length,
      sha256: sha(data),
      mtimeMs: 1,
    });

  it('countsABlockSentOverHttpOnce', async () => {
    const data = pseudoRandom(300_000, 1);
    const t = await open(data, 'put.bin');
    const [frame] = transferFrames(t.transferId, data, data.length);
    const before = await metric(server, 'weft_bytes_total', CLIENT_IN);
    const res = await c.req('PUT', `/v1/transfers/${t.transferId}/blocks`, frame!);
    expect(res.status).toBe(200);
    expect((await metric(server, 'weft_bytes_total', CLIENT_IN)) - before).toBe(frame!.byteLength);
  });

  it('countsABundlesSmallFilesIntoTheFsTierOnce', async () => {
    // The bundle's small files, counted once per bundle (their sum), not per file.
    const before = await metric(server, 'weft_bytes_total', 'tier="fs",direction="in"');
    const files = { 'b/one.txt': 'one', 'b/two.txt': 'second file', 'b/c/three.txt': 'x'.repeat(500) };
    for (const r of await c.putSmall(files)) expect(r.result.status).toBe('applied');
    const sent = Object.values(files).reduce((n, f) => n + Buffer.byteLength(f), 0);
    expect((await metric(server, 'weft_bytes_total', 'tier="fs",direction="in"')) - before).toBe(sent);
  });

  it('countsBlocksSentOverTheStreamOnce', async () => {
    const data = pseudoRandom(300_000, 2);
    const t = await open(data, 'stream.bin');
    const frames = transferFrames(t.transferId, data, 100_000);
    const before = await metric(server, 'weft_bytes_total', CLIENT_IN);
    const replies = await streamBlocks(c, frames);
    expect(replies.every((r) => r.type === 'block-ack')).toBe(true);
    const sent = frames.reduce((n, f) => n + f.byteLength, 0);
    expect((await metric(server, 'weft_bytes_total', CLIENT_IN)) - before).toBe(sent);
  });
});

describe('GET /v1/cost', () => {
  let server: Server;
  beforeAll(async () => {
    server = await startTestServer({ smallFileBytes: 1024, cost: { sampleIntervalMs: 0 } });
  });
  afterAll(async () => server.stop());

  it('billsTheRequestsBytesAndEgressOfOneUserAndTheProxy', async () => {
    const a = await TestClient.enrol(server, 'alice');
    const b = await TestClient.enrol(server, 'bob');
    const big = pseudoRandom(200_000, 3);
    expect((await uploadLarge(a, 'big.bin', big)).status).toBe('applied');
    await b.putSmall({ 'small.txt': 'x'.repeat(100) });
    const egress = async () => (await server.cost.ledger.usage('alice', Date.now())).egressBytes;
    const before = await egress();
    expect(await a.bytes('big.bin')).toEqual(big);
    expect(await a.bytes('big.bin')).toEqual(big);
    expect((await egress()) - before).toBe(2 * big.length);
    await server.cost.sample();

    const r = await a.json<CostResponse>('GET', '/v1/cost');
    expect(CostResponse.parse(r)).toEqual(r);
    expect(r).toMatchObject({
      user: 'alice',
      currency: 'USD',
      tables: { fs: 'efs-standard', objects: 's3-standard' },
    });
    expect(r.mine).toMatchObject({ objectsBytes: big.length, fsBytes: 0 });
    expect(r.mine.egressBytes).toBeGreaterThan(2 * big.length);
    expect(r.proxy).toMatchObject({ objectsBytes: big.length, fsBytes: 100 });
    // The ledger and the Prometheus counter count the same object-tier requests (the object's
    // PUT among them, and any the server made before the users enrolled); the filesystem tier's
    // are in the proxy's total too.
    const objectPuts = await metric(server, 'weft_backend_requests_total', 'backend="objects",kind="put"');
    const fsPuts = await metric(server, 'weft_backend_requests_total', 'backend="fs",kind="put"');
    expect(objectPuts).toBeGreaterThanOrEqual(1);
    expect(fsPuts).toBeGreaterThanOrEqual(1);
    expect(r.proxy.requests.put).toBe(objectPuts + fsPuts);
    expect(r.mine.soFar.total).toBeGreaterThan(0);
    expect(r.mine.projected.total).toBeGreaterThanOrEqual(r.mine.soFar.total);
    expect(r.proxy.soFar.egress).toBeCloseTo((r.proxy.egressBytes * 0.09) / 2 ** 30, 15);
    expect(r.history.at(-1)).toMatchObject({ objectsBytes: big.length, fsBytes: 0 });
    const bob = await costOf(server, b);
    expect(bob.mine).toMatchObject({ fsBytes: 100, objectsBytes: 0 });
    expect(bob.mine.egressBytes).toBeLessThan(10_000);

    const text = await (await fetch(`${server.url}/metrics`)).text();
    expect(text).toMatch(/weft_cost_usd\{scope="proxy",basis="projected",part="total"\} [0-9.e-]+/);
    const doc = (await (await fetch(`${server.url}/openapi.json`)).json()) as {
      paths: Record<string, unknown>;
    };
    expect(doc.paths['/v1/cost']).toBeDefined();
  });
});

async function costOf(server: Server, c: TestClient): Promise<CostResponse> {
  return c.json<CostResponse>('GET', '/v1/cost');
}

describe('weft_pack_pending_files and weft_backend_request_bytes_total', () => {
  let server: Server;
  beforeAll(async () => {
    // The timer never fires in this test: the flush below is the only one.
    server = await startTestServer({ packs: { timeoutMs: 3_600_000 } });
  });
  afterAll(async () => server.stop());

  it('countsSmallFilesNotYetPackedAndTheBytesThePackPutCarried', async () => {
    const c = await TestClient.enrol(server, 'alice');
    const files: Record<string, Uint8Array> = {};
    for (let i = 0; i < 5; i++) files[`p/f${i}.bin`] = pseudoRandom(2000 + i, 40 + i);
    // Two paths, one content: one pending file each, one pack entry.
    files['p/copy.bin'] = files['p/f0.bin']!;
    await c.putSmall(files);
    expect(await metric(server, 'weft_pack_pending_files', '')).toBe(6);
    const put = () => metric(server, 'weft_backend_request_bytes_total', 'backend="objects",kind="put"');
    const before = await put();
    expect(await server.packer!.flush()).toBe(1);
    expect(await metric(server, 'weft_pack_pending_files', '')).toBe(0);
    const [pack] = await server.packer!.stats();
    expect((await put()) - before).toBe(pack!.size);
    expect(
      await metric(server, 'weft_backend_request_bytes_total', 'backend="fs",kind="put"'),
    ).toBeGreaterThan(5 * 2000);
  });
});
