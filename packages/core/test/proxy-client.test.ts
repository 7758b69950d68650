import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
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
