/**
 * The inter-proxy sender's reconnect waits follow Weft's one retry policy
 * (`@weft/providers/backoff`): exponential with equal jitter and a cap, a Retry-After on a
 * refused upgrade honoured (capped), the count started over after a connection. The waits
 * go through an injected timer, so the test sees each one and fires it itself: what is
 * checked is the waits asked for, never how long anything took. A real PeerReceiver on
 * loopback (port 0) sits behind a gate that refuses upgrades while told to.
 */
import * as fsp from 'node:fs/promises';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { WebSocketServer } from 'ws';
import { type MirrorError, PeerClosedError } from '../src/errors.ts';
import { PEER_STREAM_PATH, PeerAuthError, PeerReceiver, PeerSender } from '../src/interproxy/index.ts';
import { manualTimer } from './helpers.ts';

const SECRET = 'k'.repeat(16) + randomBytes(16).toString('hex');
const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

interface Gate {
  readonly url: string;
  /** While set, upgrades are answered with this status (and Retry-After). */
  refuse: { status: number; retryAfter?: string } | undefined;
  upgrades: number;
}

/** A destination proxy whose endpoint refuses upgrades while `gate.refuse` is set. */
async function gatedDestination(): Promise<Gate> {
  const dir = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-ipx-gate-'));
  const receiver = await PeerReceiver.open({
    selfId: 'proxy-b',
    peers: new Map([['proxy-a', SECRET]]),
    dir,
  });
  const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false });
  const server = http.createServer((_req, res) => res.writeHead(404).end());
  const gate: Gate = { url: '', refuse: undefined, upgrades: 0 };
  server.on('upgrade', (req, socket, head) => {
    gate.upgrades += 1;
    const r = gate.refuse;
    if (r) {
      const retryAfter = r.retryAfter === undefined ? '' : `retry-after: ${r.retryAfter}\r\n`;
      socket.end(
        `HTTP/1.1 ${r.status} Refused\r\n${retryAfter}connection: close\r\ncontent-length: 0\r\n\r\n`,
      );
      return;
    }
    const who = receiver.auth.verify(req.headers);
    wss.handleUpgrade(req, socket, head, (ws) => receiver.accept(ws, who));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  cleanups.push(async () => {
    for (const c of wss.clients) c.terminate();
    wss.close();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await receiver.close();
    await fsp.rm(dir, { recursive: true, force: true });
  });
  return Object.assign(gate, { url: `ws://127.0.0.1:${port}${PEER_STREAM_PATH}` });
}

function sender(url: string, extra: Partial<ConstructorParameters<typeof PeerSender>[0]> = {}): PeerSender {
  const s = new PeerSender({ url, selfId: 'proxy-a', peerId: 'proxy-b', secret: SECRET, ...extra });
  cleanups.push(() => s.close());
  return s;
}

describe('inter-proxy reconnect', () => {
  it('waits grow exponentially with jitter up to the cap; a Retry-After is honoured, capped', async () => {
    const gate = await gatedDestination();
    const t = manualTimer();
    gate.refuse = { status: 503 };
    const s = sender(gate.url, {
      reconnectMinMs: 1000,
      reconnectMaxMs: 8000,
      random: () => 0.5,
      timer: t.timer,
    });
    const connected = s.connect();
    // Ceilings 1, 2, 4, 8, 8 s; each wait drawn in [ceiling/2, ceiling): 0.5 → three quarters.
    const waits: number[] = [];
    for (let i = 0; i < 5; i++) {
      waits.push(await t.nextWait());
      if (i < 4) t.fire();
    }
    expect(waits).toEqual([750, 1500, 3000, 6000, 6000]);

    gate.refuse = { status: 503, retryAfter: '2' };
    t.fire();
    expect(await t.nextWait()).toBe(2000); // what the peer asked for, not the 6 s of the policy
    gate.refuse = { status: 429, retryAfter: '3600' };
    t.fire();
    expect(await t.nextWait()).toBe(8000); // an hour, capped at reconnectMaxMs
    expect(gate.upgrades).toBe(7);

    gate.refuse = undefined;
    t.fire();
    await connected;
    expect(s.connected).toBe(true);
    expect(t.pending()).toBe(0);

    // A connection went through: the next break starts the count over.
    s.dropConnection();
    expect(await t.nextWait()).toBe(750);
    t.fire();
    await s.connect();
    expect(s.stats.reconnects).toBe(1);
    expect(t.asked).toEqual([750, 1500, 3000, 6000, 6000, 2000, 8000, 750]);
  });

  it('refused credentials and a closed sender are typed errors', async () => {
    const gate = await gatedDestination();
    const t = manualTimer();
    gate.refuse = { status: 401 };
    const s = sender(gate.url, { timer: t.timer });
    const err = await s.connect().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PeerAuthError);
    expect((err as MirrorError).code).toBe('PeerAuth');
    await t.nextWait(); // it still tries again later (the peer's configuration may be fixed)
    const waiting = s.connect();
    await s.close();
    expect(t.pending()).toBe(0); // the pending reconnect was cancelled
    const closed = await waiting.catch((e: unknown) => e);
    expect(closed).toBeInstanceOf(PeerClosedError);
    expect((closed as MirrorError).code).toBe('PeerClosed');
    await expect(s.send([])).rejects.toBeInstanceOf(PeerClosedError);
  });
});
