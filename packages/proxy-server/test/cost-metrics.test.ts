import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TransferState } from '@weft/wire';
import { pseudoRandom, sha, startTestServer, streamBlocks, TestClient, transferFrames } from './helpers.ts';

type Server = Awaited<ReturnType<typeof startTestServer>>;

/** The value of one sample of the server's Prometheus text, 0 when absent. */
export async function metric(server: { url: string }, name: string, labels: string): Promise<number> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}}`));
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
