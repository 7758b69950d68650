/**
 * Helpers for the cross-cloud share scenarios: trusting the OneDrive emulator's throwaway
 * CA from inside the test process, a seeded PRNG, and tree comparison by content hash.
 */
import { createHash } from 'node:crypto';
import { rootCertificates } from 'node:tls';
import { type Provider, collect } from '@weft/providers';

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

/** mulberry32: a small deterministic PRNG. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

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
