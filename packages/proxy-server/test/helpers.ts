/** A test harness: a server in a temp directory and a small typed client for it. */
import { createHash } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import pino from 'pino';
import { inject } from 'vitest';
import WebSocket from 'ws';
import {
  type BundleEntry,
  type ChangeRecord,
  type FeedServerMessage,
  type FileOp,
  type OpResult,
  type OpsResponse,
  type StreamServerMessage,
  type TransferState,
  encodeBundle,
  encodeTransferBlock,
} from '@weft/wire';
import { startProxyServer, type RunningProxyServer } from '../src/index.ts';
import type { ProxyConfigInput } from '../src/config.ts';
import { createTestDatabase } from './pg-admin.ts';

export const sha = (b: Uint8Array | string): string => createHash('sha256').update(b).digest('hex');

export async function tempDir(prefix = 'weft-proxy-test-'): Promise<string> {
  return fsp.mkdtemp(nodePath.join(os.tmpdir(), prefix));
}

export async function startTestServer(
  config: ProxyConfigInput = {},
): Promise<RunningProxyServer & { dir: string; stop(): Promise<void> }> {
  const dir = config.dataDir ?? (await tempDir());
  // WEFT_TEST_METADATA=postgres (global-setup.ts): a database of its own on the test cluster.
  const pg = inject('proxyPostgres');
  const databaseUrl = config.databaseUrl ?? (pg ? await createTestDatabase(pg) : undefined);
  const server = await startProxyServer(
    { dataDir: dir, gcIntervalMs: 0, ...config, ...(databaseUrl ? { databaseUrl } : {}) },
    { logger: pino({ level: 'silent' }) },
  );
  return Object.assign(server, {
    dir,
    async stop() {
      await server.close();
      await fsp.rm(dir, { recursive: true, force: true });
    },
  });
}

export class TestClient {
  constructor(
    readonly url: string,
    readonly token: string,
  ) {}

  static async enrol(
    server: { url: string; adminToken: string },
    user: string,
    deviceName = 'dev',
  ): Promise<TestClient> {
    const res = await fetch(`${server.url}/v1/enrol`, {
      method: 'POST',
      headers: { authorization: `Bearer ${server.adminToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ user, deviceName }),
    });
    if (res.status !== 201) throw new Error(`enrol failed: ${res.status} ${await res.text()}`);
    const body = (await res.json()) as { token: string };
    return new TestClient(server.url, body.token);
  }

  headers(extra: Record<string, string> = {}): Record<string, string> {
    return { authorization: `Bearer ${this.token}`, ...extra };
  }

  async req(
    method: string,
    path: string,
    body?: unknown,
    extra: Record<string, string> = {},
  ): Promise<Response> {
    const isBinary = body instanceof Uint8Array;
    return fetch(`${this.url}${path}`, {
      method,
      headers: this.headers({
        ...(body === undefined
          ? {}
          : { 'content-type': isBinary ? 'application/octet-stream' : 'application/json' }),
        ...extra,
      }),
      ...(body === undefined ? {} : { body: isBinary ? (body as Uint8Array) : JSON.stringify(body) }),
    });
  }

  async json<T>(method: string, path: string, body?: unknown): Promise<T> {
    const res = await this.req(method, path, body);
    const text = await res.text();
    if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
    return JSON.parse(text) as T;
  }

  async ops(...ops: FileOp[]): Promise<OpResult[]> {
    return (await this.json<OpsResponse>('POST', '/v1/ops', { ops })).results;
  }

  async putSmall(
    files: Record<string, string | Uint8Array>,
    revs: Record<string, string | null> = {},
  ): Promise<{ path: string; result: OpResult }[]> {
    const entries: BundleEntry[] = Object.entries(files).map(([path, c]) => {
      const content = typeof c === 'string' ? new TextEncoder().encode(c) : c;
      const rev = revs[path];
      return rev === undefined
        ? { path, mtimeMs: 1_700_000_000_000, sha256: sha(content), content }
        : { path, rev, mtimeMs: 1_700_000_000_000, sha256: sha(content), content };
    });
    return (
      await this.json<{ results: { path: string; result: OpResult }[] }>(
        'POST',
        '/v1/bundles',
        encodeBundle(entries),
      )
    ).results;
  }

  async get(path: string, range?: string): Promise<Response> {
    return this.req('GET', `/v1/files?path=${encodeURIComponent(path)}`, undefined, range ? { range } : {});
  }

  async text(path: string): Promise<string> {
    const res = await this.get(path);
    if (!res.ok) throw new Error(`GET ${path}: ${res.status} ${await res.text()}`);
    return res.text();
  }

  async bytes(path: string): Promise<Buffer> {
    const res = await this.get(path);
    if (!res.ok) throw new Error(`GET ${path}: ${res.status} ${await res.text()}`);
    return Buffer.from(await res.arrayBuffer());
  }

  ws(path: string): WebSocket {
    return new WebSocket(this.url.replace(/^http/, 'ws') + path, { headers: this.headers() });
  }
}

/** Collect feed messages until `until` says stop. */
export function readFeed(
  client: TestClient,
  cursor: number,
  until: (changes: ChangeRecord[]) => boolean,
): Promise<{ changes: ChangeRecord[]; messages: FeedServerMessage[] }> {
  return new Promise((resolve, reject) => {
    const ws = client.ws(`/v1/feed?cursor=${cursor}`);
    const changes: ChangeRecord[] = [];
    const messages: FeedServerMessage[] = [];
    ws.on('message', (data) => {
      const m = JSON.parse(data.toString()) as FeedServerMessage;
      messages.push(m);
      if (m.type === 'changes') changes.push(...m.changes);
      if (until(changes)) {
        ws.close();
        resolve({ changes, messages });
      }
    });
    ws.on('error', reject);
  });
}

/** Send frames over /v1/stream and wait for one reply per frame. */
export async function streamBlocks(client: TestClient, frames: Uint8Array[]): Promise<StreamServerMessage[]> {
  const ws = client.ws('/v1/stream');
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  const replies: StreamServerMessage[] = [];
  const done = new Promise<void>((resolve) => {
    ws.on('message', (data) => {
      replies.push(JSON.parse(data.toString()) as StreamServerMessage);
      if (replies.length === frames.length) resolve();
    });
  });
  for (const f of frames) ws.send(f);
  await done;
  ws.close();
  return replies;
}

export function pseudoRandom(size: number, seed: number): Buffer {
  const out = Buffer.alloc(size);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < size; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}

const MiB = 1024 * 1024;

/** `data` as the block frames of transfer `transferId`, `blockSize` bytes each. */
export function transferFrames(
  transferId: string,
  data: Buffer,
  blockSize = MiB,
  compress = false,
): Uint8Array[] {
  const out: Uint8Array[] = [];
  for (let off = 0, seq = 0; off < data.length; off += blockSize, seq++) {
    const payload = data.subarray(off, Math.min(data.length, off + blockSize));
    out.push(
      encodeTransferBlock(
        { transferId, seq, offset: off, last: off + blockSize >= data.length, payload },
        { compress },
      ),
    );
  }
  return out;
}

export interface UploadLargeOptions {
  /** Default 1 MiB. */
  readonly blockSize?: number;
  /** Default 1. */
  readonly mtimeMs?: number;
  /** The commit's baseRevision (absent: none sent). */
  readonly baseRevision?: string | null;
  /** The commit's own contents (CommitOp.own). */
  readonly own?: string[];
  /** 'stream' (default): over /v1/stream, every block acknowledged; 'put': one PUT /v1/transfers/{id}/blocks each. */
  readonly via?: 'stream' | 'put';
  /** With 'stream': at most this many frames per connection (default all in one). */
  readonly framesPerStream?: number;
}

/** A large upload as a client makes it: open a transfer, send its blocks, commit. */
export async function uploadLarge(
  c: TestClient,
  path: string,
  data: Buffer,
  options: UploadLargeOptions = {},
): Promise<OpResult> {
  const mtimeMs = options.mtimeMs ?? 1;
  const t = await c.json<TransferState>('POST', '/v1/transfers', {
    path,
    size: data.length,
    sha256: sha(data),
    mtimeMs,
  });
  const frames = transferFrames(t.transferId, data, options.blockSize ?? MiB);
  if (options.via === 'put') {
    for (const f of frames) await c.req('PUT', `/v1/transfers/${t.transferId}/blocks`, f);
  } else {
    const per = options.framesPerStream ?? frames.length;
    for (let i = 0; i < frames.length; i += per) {
      const replies = await streamBlocks(c, frames.slice(i, i + per));
      const refused = replies.find((r) => r.type !== 'block-ack');
      if (refused) throw new Error(`a block of ${path} was refused: ${JSON.stringify(refused)}`);
    }
  }
  const [r] = await c.ops({
    op: 'commit',
    path,
    sha256: sha(data),
    size: data.length,
    mtimeMs,
    transferId: t.transferId,
    ...(options.baseRevision !== undefined ? { baseRevision: options.baseRevision } : {}),
    ...(options.own ? { own: options.own } : {}),
  });
  if (!r) throw new Error('no result');
  return r;
}

/**
 * The two object tiers the pack tests run on: the embedded default and the suite's s3proxy
 * bucket under `prefix` (global setup injects `proxyS3`).
 */
export function packTiers(prefix: string): { name: string; objectTier?: ProxyConfigInput['objectTier'] }[] {
  const s3 = inject('proxyS3');
  return [
    { name: 'embedded' },
    {
      name: 's3proxy',
      objectTier: {
        type: 's3',
        bucket: s3.bucket,
        prefix,
        endpoint: s3.endpoint,
        region: s3.region,
        forcePathStyle: s3.forcePathStyle,
        accessKeyId: s3.accessKeyId,
        secretAccessKey: s3.secretAccessKey,
      },
    },
  ];
}
