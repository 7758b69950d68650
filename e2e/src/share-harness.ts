/**
 * Helpers for the cross-cloud share scenarios: trusting the OneDrive emulator's throwaway
 * CA from inside the test process, a seeded PRNG, tree comparison by content hash, and a
 * Weft-storage member acting through the proxy's API.
 */
import { createHash } from 'node:crypto';
import { rootCertificates } from 'node:tls';
import { ProxyClient, RemoteError } from '@weft/core';
import {
  AlreadyExistsError,
  type Body,
  type Entry,
  type Features,
  type ListOptions,
  NotFoundError,
  type Provider,
  type RemoveOptions,
  type TransferOptions,
  type WriteOptions,
  collect,
  openBody,
} from '@weft/providers';
import { type EntryInfo, type OpResult, encodeBundle, entryFromInfo, settleOpResult } from '@weft/wire';

/**
 * Make the global fetch (undici, used by the Graph SDK) trust `caPem` besides the system
 * roots. The e2e project starts no TLS global setup (NODE_EXTRA_CA_CERTS must be set before
 * Node starts), so the share tests replace fetch's global dispatcher with one whose TLS
 * options include the CA — the same undici Agent class Node's fetch uses.
 */
export async function trustCaForFetch(caPem: string): Promise<void> {
  const key = Symbol.for('undici.globalDispatcher.1');
  const g = globalThis as unknown as Record<symbol, unknown>;
  if (g[key] === undefined) await fetch('http://127.0.0.1:9/').catch(() => undefined);
  const current = g[key];
  if (typeof current !== 'object' || current === null) throw new Error('fetch has no global dispatcher');
  const Agent = (current as { constructor: new (opts: unknown) => unknown }).constructor;
  g[key] = new Agent({ connect: { ca: [...rootCertificates, caPem] } });
}

export { prng } from './harness.ts';

function relative(root: string, path: string): string {
  return root === '' ? path : path.slice(root.length + 1);
}

/** path (relative to `root`) → SHA-256 of the content, files only, sorted. */
export async function fileHashes(p: Provider, root: string): Promise<Map<string, string>> {
  const out: [string, string][] = [];
  for await (const e of p.list(root, { recursive: true })) {
    if (e.kind !== 'file') continue;
    const data = await collect(await p.read(e.path));
    out.push([relative(root, e.path), createHash('sha256').update(data).digest('hex')]);
  }
  return new Map(out.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/** Every line of every file under `root`. */
export async function allLines(p: Provider, root: string): Promise<Set<string>> {
  const out = new Set<string>();
  for await (const e of p.list(root, { recursive: true })) {
    if (e.kind !== 'file') continue;
    const text = Buffer.from(await collect(await p.read(e.path))).toString('utf8');
    for (const line of text.split('\n')) if (line) out.add(line);
  }
  return out;
}

/**
 * A person using the Weft client on their Weft storage, as a provider (for the share
 * scenarios' random operations and tree checks): every call goes through the proxy's HTTP
 * API with the member's device token, to whatever URL the proxy has now (it restarts).
 * A write or delete whose base revision is stale is refused (PreconditionFailed), as the
 * clouds' own conditional operations are; the proxy may have kept the content as a
 * conflicted copy, which is only an extra file.
 */
export class WeftPersonProvider implements Provider {
  readonly name = 'weft-person';
  readonly features: Features = {
    move: 'files-and-folders',
    copy: false,
    changeFeed: false,
    conditionalWrite: true,
    rangeRead: true,
    caseSensitive: true,
    setModTime: true,
    maxSingleUploadBytes: 2 * 1024 * 1024,
    hashAlgorithm: 'sha256',
    hashInListing: true,
    folders: 'real',
  };

  constructor(private readonly client: () => ProxyClient) {}

  private entry(e: EntryInfo): Entry {
    return entryFromInfo(e);
  }

  private fail(e: unknown, path: string): never {
    if (e instanceof RemoteError && e.status === 404) throw new NotFoundError(`${path}: not found`);
    if (e instanceof RemoteError && e.code === 'ALREADY_EXISTS')
      throw new AlreadyExistsError(`${path}: exists`);
    throw e;
  }

  private settled(r: OpResult | undefined, path: string): void {
    if (!r) throw new Error(`${path}: no result`);
    settleOpResult(r, path, (code, message) => new Error(`${path}: ${code} ${message}`));
  }

  async *list(dir: string, options: ListOptions = {}): AsyncIterable<Entry> {
    let res;
    try {
      res = await this.client().list(dir, options.recursive ?? false);
    } catch (e) {
      this.fail(e, dir);
    }
    for (const e of res.entries) yield this.entry(e);
  }

  async stat(path: string): Promise<Entry> {
    const e = await this.client().stat(path);
    if (!e) throw new NotFoundError(`${path}: not found`);
    return this.entry(e);
  }

  async read(path: string): Promise<AsyncIterable<Uint8Array>> {
    try {
      const d = await this.client().download(path);
      const data = await collect(d.body);
      return (async function* () {
        yield data;
      })();
    } catch (e) {
      this.fail(e, path);
    }
  }

  async write(path: string, body: Body, options: WriteOptions = {}): Promise<Entry> {
    const content = await collect(openBody(body));
    const sha256 = createHash('sha256').update(content).digest('hex');
    const rev = options.ifNotExists ? null : options.ifRevision;
    const bundle = encodeBundle([
      { path, mtimeMs: Date.now(), sha256, content, ...(rev !== undefined ? { rev } : {}) },
    ]);
    const [r] = await this.client().uploadBundle(bundle);
    if (r?.result.status === 'conflict' && options.ifNotExists)
      throw new AlreadyExistsError(`${path}: exists`);
    this.settled(r?.result, path);
    return this.stat(path);
  }

  async remove(path: string, options: RemoveOptions = {}): Promise<void> {
    const cur = await this.client().stat(path);
    if (!cur) throw new NotFoundError(`${path}: not found`);
    const [r] = await this.client().ops([
      {
        op: 'delete',
        path,
        ...(options.ifRevision !== undefined ? { baseRevision: options.ifRevision } : {}),
      },
    ]);
    this.settled(r, path);
  }

  async mkdir(path: string): Promise<void> {
    if (path === '') return;
    const [r] = await this.client().ops([{ op: 'mkdir', path }]);
    this.settled(r, path);
  }

  async move(from: string, to: string, _options?: TransferOptions): Promise<Entry> {
    const [r] = await this.client().ops([{ op: 'move', from, to }]);
    this.settled(r, from);
    return this.stat(to);
  }
}
