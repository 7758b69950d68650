/**
 * The proxy client checks a bundle upload's answer and the feed's messages by hand when
 * they have the common shape (wire fast-check.ts, issue #16) — and still refuses a malformed
 * one with the schema's error: a loopback server answers POST /v1/bundles and the feed
 * WebSocket with what each case gives. Counted: the common answers never reach zod.
 */
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { fastChecks } from '@weft/wire';
import { afterEach, describe, expect, it } from 'vitest';
import { WebSocketServer } from 'ws';
import { ProxyClient, RemoteError } from '../src/remote/proxy-client.ts';

const SHA = 'b'.repeat(64);
const applied = (path: string, seq: number) => ({
  path,
  result: {
    status: 'applied',
    seq,
    entry: { path, kind: 'file', size: 3, mtimeMs: 1000, revision: `r${seq}`, sha256: SHA },
  },
});

const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanup.splice(0).reverse()) await c();
});

/** A server answering every request with `answer` (JSON) and every feed socket with `feed`. */
async function serve(answer: unknown, feed: unknown[] = []): Promise<ProxyClient> {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(answer));
    });
  });
  const wss = new WebSocketServer({ server });
  wss.on('connection', (ws) => {
    for (const m of feed) ws.send(JSON.stringify(m));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanup.push(
    () =>
      new Promise<void>((resolve) => {
        for (const c of wss.clients) c.terminate();
        wss.close();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  const { port } = server.address() as AddressInfo;
  return new ProxyClient({ baseUrl: `http://127.0.0.1:${port}`, token: 't' });
}

describe("the proxy client's answer checks", () => {
  it('take an all-applied bundle answer by hand', async () => {
    const results = [applied('a.txt', 1), applied('d/b.txt', 2)];
    const client = await serve({ results });
    const before = { ...fastChecks };
    expect(await client.uploadBundle(new Uint8Array(8))).toEqual(results);
    expect([fastChecks.byHand - before.byHand, fastChecks.byZod - before.byZod]).toEqual([1, 0]);
  });

  it.each([
    ['a negative seq', { results: [{ ...applied('a.txt', 1), result: { status: 'applied', seq: -1 } }] }],
    ['an unknown status', { results: [{ path: 'a.txt', result: { status: 'stored', seq: 1 } }] }],
    ['a path leaving the folder', { results: [applied('../a.txt', 1)] }],
    [
      'a bad hash',
      {
        results: [
          {
            path: 'a',
            result: { ...applied('a', 1).result, entry: { ...applied('a', 1).result.entry, sha256: 'x' } },
          },
        ],
      },
    ],
    ['no results', { result: [] }],
  ])('refuse a bundle answer with %s, by the schema', async (_, answer) => {
    const client = await serve(answer);
    const before = fastChecks.byZod;
    const e = await client.uploadBundle(new Uint8Array(8)).catch((err: unknown) => err);
    expect(e).toBeInstanceOf(RemoteError);
    expect((e as Error).message).toMatch(/response does not match the API schema/);
    expect(fastChecks.byZod - before).toBe(1);
  });

  it('take a feed changes message by hand, and end the socket on a malformed one', async () => {
    const good = {
      type: 'changes',
      cursor: 2,
      changes: [
        { seq: 1, type: 'upsert', path: 'a.txt', entry: applied('a.txt', 1).result.entry, device: 'x' },
        { seq: 2, type: 'delete', path: 'gone.txt' },
      ],
    };
    const bad = { type: 'changes', cursor: 3, changes: [{ seq: 3, type: 'delete', path: 'a/../../etc' }] };
    const client = await serve({}, [good, bad]);
    const got: unknown[] = [];
    const before = { ...fastChecks };
    const reason = await new Promise<string>((resolve) => {
      const feed = client.openFeed(0, (m) => got.push(m), resolve);
      cleanup.push(() => feed.dispose());
    });
    expect(got).toEqual([good]);
    expect(reason).toMatch(/^malformed feed message: /);
    expect([fastChecks.byHand - before.byHand, fastChecks.byZod - before.byZod]).toEqual([1, 1]);
  });
});
