import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { requestBody } from '../src/remote/api-requests.ts';
import { OfflineError, ProxyClient } from '../src/remote/proxy-client.ts';

describe('ProxyClient connections', () => {
  let server: http.Server | undefined;
  afterEach(() => new Promise<void>((r) => (server ? server.close(() => r()) : r())));

  /** A server that drops the connection without an answer on the requests `drop` names. */
  async function start(drop: (n: number) => boolean): Promise<{ url: string; seen: () => number }> {
    let n = 0;
    server = http.createServer((req, res) => {
      n += 1;
      if (drop(n)) {
        req.socket.destroy(); // as a keep-alive socket the server closed just as we sent
        return;
      }
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ user: 'alice', deviceId: 'd_1', deviceName: 'laptop', seq: n }));
    });
    await new Promise<void>((r) => server?.listen(0, '127.0.0.1', r));
    const { port } = server.address() as AddressInfo;
    return { url: `http://127.0.0.1:${port}`, seen: () => n };
  }

  it('sends a request again once when the connection dies before any answer', async () => {
    const s = await start((n) => n === 2);
    const client = new ProxyClient({ baseUrl: s.url, token: 't' });
    expect((await client.whoami()).seq).toBe(1);
    expect((await client.whoami()).seq).toBe(3); // the reset request, sent again
    expect(s.seen()).toBe(3);
  });

  it('reports the server offline when the connection keeps dying', async () => {
    const s = await start(() => true);
    const client = new ProxyClient({ baseUrl: s.url, token: 't' });
    await expect(client.whoami()).rejects.toBeInstanceOf(OfflineError);
    expect(s.seen()).toBe(2); // one retry, no more
  });
});

describe('ProxyClient request bodies', () => {
  let server: http.Server | undefined;
  afterEach(() => new Promise<void>((r) => (server ? server.close(() => r()) : r())));

  it('hands fetch the bytes themselves, not a copy (issue #16)', async () => {
    // fetch copies a Uint8Array body; at 100,000 files the copies of the 4 MiB bundles piled
    // up between collections. The stream given to fetch yields a view of the same memory.
    const backing = new Uint8Array(64).map((_, i) => i);
    const bytes = backing.subarray(8, 40);
    const { body } = requestBody(bytes);
    const chunks: Uint8Array[] = [];
    for await (const c of body as ReadableStream<Uint8Array>) chunks.push(c);
    expect(chunks).toHaveLength(1);
    expect(chunks[0]?.buffer).toBe(backing.buffer);
    expect(Buffer.from(chunks[0] as Uint8Array).equals(Buffer.from(bytes))).toBe(true);
  });

  it('sends a body whole, with its length, and again intact on a retry', async () => {
    const got: { length: string | undefined; chunked: boolean; body: Buffer }[] = [];
    let n = 0;
    server = http.createServer((req, res) => {
      const parts: Buffer[] = [];
      req.on('data', (c: Buffer) => parts.push(c));
      req.on('end', () => {
        n += 1;
        got.push({
          length: req.headers['content-length'],
          chunked: req.headers['transfer-encoding'] !== undefined,
          body: Buffer.concat(parts),
        });
        if (n === 1) return void req.socket.destroy(); // dropped: sent again on a fresh connection
        if (n === 2) {
          res.writeHead(503, { 'retry-after': '0', 'content-type': 'application/json' });
          return void res.end(JSON.stringify({ error: { code: 'SLOW_DOWN', message: 'busy' } }));
        }
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ results: [] }));
      });
    });
    await new Promise<void>((r) => server?.listen(0, '127.0.0.1', r));
    const { port } = server.address() as AddressInfo;
    const client = new ProxyClient({ baseUrl: `http://127.0.0.1:${port}`, token: 't' });
    const backing = Buffer.alloc(300_000).map((_, i) => (i * 7) % 256);
    const bytes = backing.subarray(1_000, 250_000);
    expect(await client.uploadBundle(bytes)).toEqual([]);
    expect(got).toHaveLength(3);
    for (const g of got) {
      expect(g.length).toBe(String(bytes.byteLength));
      expect(g.chunked).toBe(false);
      expect(g.body.equals(bytes)).toBe(true);
    }
  });
});
