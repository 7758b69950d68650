/**
 * What a draining instance waits for (src/cluster/load.ts ActiveTransfers): content requests
 * in flight, and a transfer whose block arrived within the linger time (the next block follows
 * its ack), also when the client went away mid-request; other requests do not count. A real
 * Fastify app on loopback port 0, the clock injected for the linger.
 */
import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { ActiveTransfers } from '../src/cluster/load.ts';

describe('active transfers', () => {
  it('countsContentRequestsAndRecentlyActiveTransfersOnly', async () => {
    let now = 0;
    const active = new ActiveTransfers(5000, () => now);
    const app = Fastify({ forceCloseConnections: true });
    active.install(app);
    let release: () => void = () => undefined;
    const gate = () => new Promise<void>((r) => (release = r));
    app.put('/v1/transfers/:id/blocks', async () => {
      await gate();
      return { ok: true };
    });
    app.get('/v1/files', async () => {
      await gate();
      return 'bytes';
    });
    app.get('/v1/whoami', async () => ({ me: 1 }));
    const url = await app.listen({ host: '127.0.0.1', port: 0 });
    try {
      const id = 'ab'.repeat(16);
      expect(active.count()).toBe(0);
      await fetch(`${url}/v1/whoami`).then((r) => r.text());
      expect(active.count()).toBe(0);
      // A block in flight counts once, and its transfer lingers after the ack.
      const block = fetch(`${url}/v1/transfers/${id}/blocks`, { method: 'PUT', body: 'x' });
      await until(() => active.count() === 1);
      release();
      await (await block).text();
      now = 4000;
      expect(active.count()).toBe(1);
      now = 10_000;
      expect(active.count()).toBe(0);
      // A download in flight counts until it ends, even when the client goes away.
      const ac = new AbortController();
      const download = fetch(`${url}/v1/files?path=a`, { signal: ac.signal }).catch(() => undefined);
      await until(() => active.count() === 1);
      ac.abort();
      await download;
      await until(() => active.count() === 0);
      release();
    } finally {
      await app.close();
    }
  });
});

async function until(ok: () => boolean): Promise<void> {
  for (let i = 0; i < 200 && !ok(); i++) await new Promise((r) => setTimeout(r, 25));
  expect(ok()).toBe(true);
}
