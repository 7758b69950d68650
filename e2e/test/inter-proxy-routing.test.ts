/**
 * The inter-proxy link under the mirror (issue 7, "Inter-proxy transfer protocol"): proxy
 * A hosts a share of a Dropbox member and a Drive member; A's own path to Drive is slow (a
 * throttled link), B's is not. After one probe-and-exchange round ProxySelector names B
 * the only server of Drive, so the mirror's writes to Drive go A → B over the peer link
 * (content as batch blocks, then a conditional `write` request) and B writes Drive. The
 * route is proven by bytes: the file's content crosses the peer link, not A's Drive path.
 * An edit then travels as an rsync delta; a restart of B in the middle of a transfer is
 * survived (A reconnects, starts the batch over, the file arrives).
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DropboxEmulator } from '@weft/cloud-emulators/dropbox';
import { GDriveEmulator } from '@weft/cloud-emulators/gdrive';
import { ThrottledLink } from '@weft/mirror/interproxy';
import { DropboxProvider, GDriveProvider, collect, type Provider } from '@weft/providers';
import { startProxyServer, type ProxyConfigInput, type RunningProxyServer } from '@weft/proxy-server';

const log = pino({ level: 'warn' });
let dbx: DropboxEmulator;
let gd: GDriveEmulator;
let slowToDrive: ThrottledLink;
let slowToDropbox: ThrottledLink;
let wan: ThrottledLink;
let work: string;
let proxyA: RunningProxyServer;
let proxyB: RunningProxyServer;
let configB: ProxyConfigInput;
let bPort = 0;
let annDropbox: Provider;
let benDrive: Provider;

const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');

async function contentOf(p: Provider, path: string): Promise<Buffer | undefined> {
  try {
    return Buffer.from(await collect(await p.read(path)));
  } catch {
    return undefined;
  }
}

/** Wait until Drive holds exactly `data` at `path` (the mirror runs on its own). */
async function arrives(path: string, data: Uint8Array): Promise<void> {
  const want = sha(data);
  for (let i = 0; i < 600; i++) {
    const got = await contentOf(benDrive, path);
    if (got && sha(got) === want) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${path} never arrived in Drive`);
}

beforeAll(async () => {
  dbx = await new DropboxEmulator({ longpollTimeScale: 0.02 }).start();
  gd = await new GDriveEmulator().start();
  // "Far" paths: A → Drive and B → Dropbox are slow; the peer link is a wide-area link.
  slowToDrive = new ThrottledLink({ bitsPerSecond: 4_000_000, latencyMs: 15 });
  slowToDropbox = new ThrottledLink({ bitsPerSecond: 4_000_000, latencyMs: 15 });
  wan = new ThrottledLink({ bitsPerSecond: 16_000_000, latencyMs: 5 });
  const driveFar = await slowToDrive.forward({ host: '127.0.0.1', port: gd.port });
  const dropboxFar = await slowToDropbox.forward({ host: '127.0.0.1', port: dbx.port });
  work = await mkdtemp(join(tmpdir(), 'weft-route-'));
  const secret = randomBytes(32).toString('hex');
  const routing = { enabled: true, intervalMs: 0, probeBytes: 128 * 1024 };
  configB = {
    dataDir: join(work, 'b'),
    gcIntervalMs: 0,
    logLevel: 'warn',
    shares: { enabled: false, endpoints: { dropbox: dropboxFar.url, gdrive: gd.url } },
    peer: { id: 'proxy-b', peers: [{ id: 'proxy-a', secret }], routing },
  };
  proxyB = await startProxyServer(configB, { logger: log });
  bPort = Number(new URL(proxyB.url).port);
  const toB = await wan.forward({ host: '127.0.0.1', port: bPort });
  proxyA = await startProxyServer(
    {
      dataDir: join(work, 'a'),
      gcIntervalMs: 0,
      logLevel: 'warn',
      shares: {
        enabled: true,
        pollIntervalMs: 100,
        longpollTimeoutSeconds: 30,
        notifyBatchMs: 50,
        endpoints: { dropbox: dbx.url, gdrive: driveFar.url },
      },
      peer: {
        id: 'proxy-a',
        peers: [{ id: 'proxy-b', secret, url: `ws://127.0.0.1:${toB.port}` }],
        // Small transfer blocks: files of ≥ 64 KiB go as pieces / deltas, not bundles.
        blockBytes: 64 * 1024,
        // Not reached while B is up (its restart below takes well under this).
        routing: { ...routing, writeTimeoutMs: 10_000 },
      },
    },
    { logger: log },
  );
  annDropbox = new DropboxProvider({ token: dbx.accessToken, baseUrl: dbx.url });
  benDrive = new GDriveProvider({ token: gd.accessToken, rootUrl: gd.url });
}, 60_000);

afterAll(async () => {
  await proxyA?.close();
  await proxyB?.close(); // closing twice is a no-op
  for (const l of [wan, slowToDrive, slowToDropbox]) await l?.close();
  await dbx?.close();
  await gd?.close();
  if (work) await rm(work, { recursive: true, force: true });
});

describe('mirror writes routed through the peer that serves the cloud', () => {
  it('Dropbox → Drive via proxy B: whole, then a delta, then across a restart of B', async () => {
    const tokenOf = async (user: string) => (await proxyA.enrol(user, 'laptop')).token;
    const tokens = { ann: await tokenOf('ann'), ben: await tokenOf('ben') };
    const api = async <T>(user: 'ann' | 'ben', method: string, path: string, body?: unknown): Promise<T> => {
      const res = await fetch(`${proxyA.url}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${tokens[user]}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      const text = await res.text();
      if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
      return (text ? JSON.parse(text) : undefined) as T;
    };
    await annDropbox.mkdir('Team');
    await annDropbox.mkdir('Team/share');
    await benDrive.mkdir('share');
    const annAcc = await api<{ id: string }>('ann', 'POST', '/v1/accounts', {
      provider: 'dropbox',
      label: 'ann@example.com',
      tokens: { accessToken: dbx.accessToken },
    });
    const benAcc = await api<{ id: string }>('ben', 'POST', '/v1/accounts', {
      provider: 'gdrive',
      label: 'ben@example.com',
      tokens: { accessToken: gd.accessToken },
    });
    const share = await api<{ id: string }>('ann', 'POST', '/v1/shares', {
      name: 'Team',
      replica: { cloud: 'account', accountId: annAcc.id, root: 'Team/share' },
    });
    const inv = await api<{ token: string }>('ann', 'POST', `/v1/shares/${share.id}/invites`, {});
    await api('ben', 'POST', '/v1/shares/accept', {
      token: inv.token,
      replica: { cloud: 'account', accountId: benAcc.id, root: 'share' },
    });
    await proxyA.shares?.quiesce(share.id);

    // One probe-and-exchange round (A probes its clouds, hands B the accounts to probe, takes B's figures).
    const routerA = proxyA.peerRouter;
    if (!routerA) throw new Error('no router on A');
    await routerA.measureOnce();
    expect(routerA.selector.servers('gdrive')).toEqual(['proxy-b']);
    expect(routerA.selector.servers('dropbox')).toEqual(['proxy-a']);
    expect(proxyB.peerRouter?.selector.servers('dropbox')).toEqual(['proxy-a']);

    const sender = proxyA.peerLink?.sender('proxy-b');
    if (!sender) throw new Error('no sender');

    // 1. A new file in Dropbox arrives in Drive through B.
    const v1 = randomBytes(1024 * 1024);
    const drive0 = slowToDrive.stats.bytesUp;
    const wan0 = wan.stats.bytesUp;
    await annDropbox.write('Team/share/data.bin', v1);
    await arrives('share/data.bin', v1);
    // Drive may show the file before A has B's answer: let the engine finish its step.
    await proxyA.shares?.quiesce(share.id);
    expect(routerA.stats.routedWrites).toBe(1);
    expect(proxyB.peerRouter?.stats.writesForPeers).toBe(1);
    expect(wan.stats.bytesUp - wan0).toBeGreaterThan(v1.byteLength); // the content crossed the peer link
    expect(slowToDrive.stats.bytesUp - drive0).toBeLessThan(v1.byteLength / 10); // not A's Drive path

    // 2. An edit travels as a delta against B's cached copy.
    const v2 = Buffer.from(v1);
    v2.write('an edit in the middle of the file', 500_000);
    const wan1 = wan.stats.bytesUp;
    await annDropbox.write('Team/share/data.bin', v2);
    await arrives('share/data.bin', v2);
    await proxyA.shares?.quiesce(share.id);
    expect(routerA.stats.routedWrites).toBe(2);
    expect(wan.stats.bytesUp - wan1).toBeLessThan(v2.byteLength / 4);

    // 3. B restarts while a 2 MiB file is on the link: A reconnects, starts the batch over, it arrives.
    const v3 = randomBytes(2 * 1024 * 1024);
    const acked0 = sender.stats.blocksAcked;
    const reconnects0 = sender.stats.reconnects;
    await annDropbox.write('Team/share/big.bin', v3);
    for (let i = 0; i < 600 && sender.stats.blocksAcked < acked0 + 4; i++)
      await new Promise((r) => setTimeout(r, 20));
    expect(sender.stats.blocksAcked).toBeGreaterThanOrEqual(acked0 + 4);
    await proxyB.close();
    proxyB = await startProxyServer({ ...configB, port: bPort }, { logger: log });
    await arrives('share/big.bin', v3);
    await proxyA.shares?.quiesce(share.id);
    expect(sender.stats.reconnects).toBeGreaterThan(reconnects0);
    expect(routerA.stats.routedWrites).toBe(3);
    // Nothing came back as an echo, and Dropbox still holds exactly what Ann wrote.
    expect(sha((await contentOf(annDropbox, 'Team/share/big.bin')) ?? Buffer.alloc(0))).toBe(sha(v3));
    expect(proxyA.shares?.stats(share.id).conflicts).toBe(0);

    // 4. A routed write keeps the conditional semantics the mirror relies on: the peer's
    //    provider error comes back as the same error class (so a concurrent edit becomes a
    //    conflicted copy exactly as on a direct write).
    const routed = routerA.route({
      shareId: share.id,
      replicaId: 'probe',
      kind: 'gdrive',
      accountId: benAcc.id,
      provider: new GDriveProvider({ token: gd.accessToken, rootUrl: gd.url }),
      tokens: () => ({ accessToken: gd.accessToken }),
    });
    const current = await benDrive.stat('share/data.bin');
    await expect(
      routed.write('share/data.bin', Buffer.from('stale'), { ifRevision: current.revision + 'x' }),
    ).rejects.toMatchObject({ code: 'PreconditionFailed' });
    await expect(
      routed.write('share/data.bin', Buffer.from('exists'), { ifNotExists: true }),
    ).rejects.toMatchObject({ code: 'AlreadyExists' });
    const ok = await routed.write('share/data.bin', Buffer.from('v4'), { ifRevision: current.revision });
    expect((await benDrive.stat('share/data.bin')).revision).toBe(ok.revision);
    expect(routerA.stats.routedWrites).toBe(4);

    // 5. Small files written at once share batches (and bundles) on the link.
    const batches0 = routerA.stats.routedBatches;
    const routed0 = routerA.stats.routedWrites;
    const small = Array.from({ length: 20 }, (_, i) => ({ path: `s${i}.bin`, data: randomBytes(10_000) }));
    await Promise.all(small.map((f) => annDropbox.write(`Team/share/${f.path}`, f.data)));
    for (const f of small) await arrives(`share/${f.path}`, f.data);
    await proxyA.shares?.quiesce(share.id);
    expect(routerA.stats.routedWrites - routed0).toBe(20);
    expect(routerA.stats.routedBatches - batches0).toBeLessThan(20);

    // 6. B is down: the routed write times out and is made directly (conditional as ever).
    await proxyB.close();
    const v5 = randomBytes(100_000);
    await annDropbox.write('Team/share/while-b-down.bin', v5);
    await arrives('share/while-b-down.bin', v5);
    await proxyA.shares?.quiesce(share.id);
    expect(routerA.stats.fallbacks).toBe(1);
    expect(routerA.stats.routedWrites).toBe(24);
    process.stdout.write(
      `routing: ${JSON.stringify({ router: routerA.stats, link: sender.stats, wan: wan.stats, slowToDrive: slowToDrive.stats })}\n`,
    );
  }, 120_000);
});
