/**
 * Two proxies joined by a rate-limited wide-area link, for the inter-proxy e2e test and
 * bench (CoCloud §III-C, Fig. 6–7): proxy A runs "near" Dropbox (the source cloud), proxy B
 * "near" Google Drive (the destination); both clouds are the emulators, reached through the
 * official SDK adapters. Everything that crosses regions goes through one ThrottledLink:
 * A → B's peer connection, and the baseline's Dropbox downloads from B's side.
 *
 * - ours: A downloads the pending files from Dropbox (its buffer, step 0), sends them over
 *   the peer link; B rebuilds them and uploads them to Drive (`deliver`).
 * - baseline ("IFTTT-like"): at B, each file is downloaded whole through Dropbox's API over
 *   the link and uploaded whole to Drive, `concurrency` files at a time.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { DropboxEmulator } from '@weft/cloud-emulators/dropbox';
import { GDriveEmulator } from '@weft/cloud-emulators/gdrive';
import { DropboxProvider, GDriveProvider, collect, type Provider } from '@weft/providers';
import { startProxyServer, type RunningProxyServer } from '@weft/proxy-server';
import { ThrottledLink, type FileOutcome, type PeerSender, type SourceFile } from '@weft/mirror/interproxy';

export interface PairOptions {
  readonly bitsPerSecond: number;
  /** One-way latency of the link, ms. */
  readonly latencyMs: number;
  /** The peer link's transfer block size (default 4 MiB). */
  readonly blockBytes?: number;
  readonly maxInFlight?: number;
  /** Files handled at once by the baseline (default 8, as many as B uploads at once). */
  readonly concurrency?: number;
}

export interface InterProxyPair {
  readonly link: ThrottledLink;
  readonly proxyA: RunningProxyServer;
  readonly proxyB: RunningProxyServer;
  readonly sender: PeerSender;
  /** Dropbox as proxy A sees it (near). */
  readonly dropbox: Provider;
  /** Drive as proxy B sees it (near). */
  readonly drive: Provider;
  /** Forward `paths` from Dropbox to Drive under `ours/` through the peer link, `batchFiles` per batch. */
  forward(paths: readonly string[], batchFiles?: number): Promise<FileOutcome[]>;
  /** The same files, IFTTT-like, to Drive under `baseline/`, `concurrency` files at a time. */
  baseline(paths: readonly string[], concurrency?: number): Promise<void>;
  close(): Promise<void>;
}

async function pool<T>(items: readonly T[], n: number, fn: (t: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(n, items.length) }, async () => {
      while (next < items.length) {
        const item = items[next++] as T;
        await fn(item);
      }
    }),
  );
}

/** mkdir of each parent once per provider. */
function parentMaker(p: Provider): (path: string) => Promise<void> {
  const made = new Map<string, Promise<void>>();
  return async (path) => {
    const i = path.lastIndexOf('/');
    if (i <= 0) return;
    const dir = path.slice(0, i);
    let m = made.get(dir);
    if (!m) {
      m = p.mkdir(dir);
      made.set(dir, m);
    }
    await m;
  };
}

export async function startInterProxyPair(options: PairOptions): Promise<InterProxyPair> {
  const concurrency = options.concurrency ?? 8;
  const dbx = await new DropboxEmulator().start();
  const gd = await new GDriveEmulator().start();
  const link = new ThrottledLink({ bitsPerSecond: options.bitsPerSecond, latencyMs: options.latencyMs });
  const work = await mkdtemp(join(tmpdir(), 'weft-interproxy-'));
  const secret = randomBytes(32).toString('hex');
  const log = pino({ level: 'warn' });
  const proxyB = await startProxyServer(
    {
      dataDir: join(work, 'b'),
      gcIntervalMs: 0,
      logLevel: 'warn',
      shares: { enabled: false },
      peer: { id: 'proxy-b', peers: [{ id: 'proxy-a', secret }] },
    },
    { logger: log },
  );
  const toB = await link.forward({ host: '127.0.0.1', port: Number(new URL(proxyB.url).port) });
  const proxyA = await startProxyServer(
    {
      dataDir: join(work, 'a'),
      gcIntervalMs: 0,
      logLevel: 'warn',
      shares: { enabled: false },
      peer: {
        id: 'proxy-a',
        peers: [{ id: 'proxy-b', secret, url: `ws://127.0.0.1:${toB.port}` }],
        ...(options.blockBytes ? { blockBytes: options.blockBytes } : {}),
        ...(options.maxInFlight ? { maxInFlight: options.maxInFlight } : {}),
      },
    },
    { logger: log },
  );
  const peerA = proxyA.peerLink;
  const peerB = proxyB.peerLink;
  if (!peerA || !peerB) throw new Error('peer link not configured');

  const dropbox = new DropboxProvider({ token: dbx.accessToken, baseUrl: dbx.url });
  const drive = new GDriveProvider({ token: gd.accessToken, rootUrl: gd.url, root: 'weft' });
  const toDropbox = await link.forward({ host: '127.0.0.1', port: dbx.port });
  const dropboxFar = new DropboxProvider({ token: dbx.accessToken, baseUrl: toDropbox.url });
  const driveParents = parentMaker(drive);

  peerB.setDeliver(async (f) => {
    const target = `ours/${f.path}`;
    await driveParents(target);
    await drive.write(target, await readFile(f.file), { size: f.size, sha256: f.sha256 });
  });
  const sender = peerA.sender('proxy-b');
  await sender.connect();

  return {
    link,
    proxyA,
    proxyB,
    sender,
    dropbox,
    drive,
    async forward(paths, batchFiles = 25) {
      // Step 0: the source proxy reads the pending files from its (near) cloud into its
      // buffer; step 1: whenever `batchFiles` are buffered, their metadata goes out as one
      // batch (batches are independent: the next one is read while this one travels).
      const sends: Promise<FileOutcome[]>[] = [];
      let buffered: SourceFile[] = [];
      const flush = (): void => {
        if (buffered.length === 0) return;
        const batch = buffered.sort((a, b) => (a.path < b.path ? -1 : 1));
        buffered = [];
        sends.push(sender.send(batch));
      };
      await pool(paths, 8, async (path) => {
        const content = await collect(await dropbox.read(path));
        buffered.push({
          path,
          size: content.byteLength,
          sha256: createHash('sha256').update(content).digest('hex'),
          content,
        });
        if (buffered.length >= batchFiles) flush();
      });
      flush();
      return (await Promise.all(sends)).flat();
    },
    async baseline(paths, n = concurrency) {
      await pool(paths, n, async (path) => {
        const content = await collect(await dropboxFar.read(path));
        const target = `baseline/${path}`;
        await driveParents(target);
        await drive.write(target, content, { size: content.byteLength });
      });
    },
    async close() {
      await proxyA.close();
      await proxyB.close();
      await link.close();
      await dbx.close();
      await gd.close();
      await rm(work, { recursive: true, force: true });
    },
  };
}
