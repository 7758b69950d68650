/**
 * The proxy client with several instances (options.servers, remote/server-pool.ts): a
 * request that cannot reach its instance, or gets 502/503 from it twice, is sent to the next
 * at once; SLOW_DOWN is waited out where it is; all away is OfflineError. Two plain HTTP
 * servers on loopback stand for two instances (the agent against real proxies on one
 * PostgreSQL is e2e/test/agent-failover.test.ts).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { OfflineError, ProxyClient } from '../src/remote/proxy-client.ts';
import { ServerPool } from '../src/remote/server-pool.ts';
import { listenLoopback } from './support/loopback-server.ts';

interface Instance {
  url: string;
  /** Requests seen. */
  seen: number;
  /** What the next requests get: an answer, a status with a body, or 'hang' (no answer ever). */
  answer: () => { status: number; body?: string; headers?: Record<string, string> } | 'hang' | undefined;
  close(): Promise<void>;
}

const running: Instance[] = [];
afterEach(async () => {
  for (const s of running.splice(0)) await s.close();
});

async function instance(name: string): Promise<Instance> {
  const inst: Instance = {
    url: '',
    seen: 0,
    answer: () => undefined,
    close: async () => undefined,
  };
  const server = await listenLoopback((_req, res) => {
    inst.seen += 1;
    const a = inst.answer();
    if (a === 'hang') return;
    if (a) {
      res.writeHead(a.status, a.headers ?? {});
      res.end(a.body ?? '');
      return;
    }
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ user: name, deviceId: 'd_1', deviceName: 'laptop', seq: inst.seen }));
  });
  inst.url = server.url;
  inst.close = server.close;
  running.push(inst);
  return inst;
}

async function twoInstances() {
  const a = await instance('a');
  const b = await instance('b');
  const pool = new ServerPool({ home: a.url, downBackoff: { baseMs: 60_000, capMs: 60_000 } });
  pool.learn([{ url: a.url }, { url: b.url }]);
  const client = new ProxyClient({ baseUrl: a.url, token: 't', servers: pool });
  return { a, b, pool, client };
}

describe('ProxyClient failover between instances', () => {
  it('sendsARequestToTheNextInstanceWhenItsOwnIsGone', async () => {
    const { a, b, pool, client } = await twoInstances();
    expect((await client.whoami()).user).toBe('a');
    await a.close();
    expect((await client.whoami()).user).toBe('b');
    expect(pool.current).toBe(b.url);
    expect(client.baseUrl).toBe(b.url);
    expect(pool.failovers).toBe(1);
    expect((await client.whoami()).user).toBe('b'); // and stays there
  });

  it('movesOnAfterTwo503sButNotAfterOne', async () => {
    const { a, b, pool, client } = await twoInstances();
    let refusals = 1;
    const unavailable = () =>
      refusals-- > 0
        ? {
            status: 503,
            body: '{"error":{"code":"UNAVAILABLE","message":"no database"}}',
            headers: { 'content-type': 'application/json' },
          }
        : undefined;
    a.answer = unavailable;
    expect((await client.whoami()).user).toBe('a'); // one 503, asked again, answered
    expect(a.seen).toBe(2);
    refusals = 2;
    expect((await client.whoami()).user).toBe('b');
    expect(pool.current).toBe(b.url);
    // A 502 from a load balancer in front of a dead instance counts the same.
    b.answer = () => ({ status: 502, body: 'bad gateway' });
    a.answer = () => undefined;
    await expect(client.whoami()).rejects.toBeInstanceOf(OfflineError); // a is still in its backoff
    expect(b.seen).toBe(3);
  });

  it('waitsOutSlowDownWhereItIs', async () => {
    const { a, b, pool, client } = await twoInstances();
    let busy = 2;
    a.answer = () =>
      busy-- > 0
        ? {
            status: 503,
            body: '{"error":{"code":"SLOW_DOWN","message":"busy"}}',
            headers: { 'content-type': 'application/json', 'retry-after': '0' },
          }
        : undefined;
    expect((await client.whoami()).user).toBe('a');
    expect(client.busyWaits).toBe(2);
    expect(pool.current).toBe(a.url);
    expect(b.seen).toBe(0);
  });

  it('abandonsRequestsAndTheFeedWaitingOnAnInstanceFoundDown', async () => {
    const { a, b, pool, client } = await twoInstances();
    a.answer = () => 'hang';
    const pending = client.whoami();
    let feedClosed: string | undefined;
    const feed = client.openFeed(
      0,
      () => undefined,
      (why) => (feedClosed = why),
    );
    for (let i = 0; i < 200 && a.seen < 2; i++) await new Promise((r) => setTimeout(r, 10));
    expect(a.seen).toBe(2); // both wait on a, which never answers
    // The watch's probe of a timed out (server-watch.ts).
    pool.failed(a.url, 'unreachable');
    expect((await pending).user).toBe('b');
    expect(pool.current).toBe(b.url);
    expect(feedClosed).toMatch(/stopped answering/);
    feed.dispose();
  });

  it('isOfflineWhenEveryInstanceIsAway', async () => {
    const { a, b, client } = await twoInstances();
    await a.close();
    await b.close();
    await expect(client.whoami()).rejects.toBeInstanceOf(OfflineError);
  });

  it('keepsOneUrlWithoutAPool', async () => {
    const a = await instance('a');
    const b = await instance('b');
    const client = new ProxyClient({ baseUrl: a.url, token: 't' });
    a.answer = () => ({ status: 503, body: 'down' });
    await expect(client.whoami()).rejects.toBeInstanceOf(OfflineError);
    expect(a.seen).toBe(1);
    expect(b.seen).toBe(0);
  });
});
