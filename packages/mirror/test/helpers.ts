import { createHash } from 'node:crypto';
import { type Provider, collect } from '@weft/providers';

/** path (relative to root) → 'dir' or the content's SHA-256. */
export async function treeOf(p: Provider, root: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for await (const e of p.list(root, { recursive: true })) {
    const rel = root === '' ? e.path : e.path.slice(root.length + 1);
    if (e.kind === 'dir') out.set(rel, 'dir');
    else
      out.set(
        rel,
        createHash('sha256')
          .update(await collect(await p.read(e.path)))
          .digest('hex'),
      );
  }
  return new Map([...out].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/** Every file's content (for checking that written tokens survive). */
export async function contentsOf(p: Provider, root: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for await (const e of p.list(root, { recursive: true })) {
    if (e.kind !== 'file') continue;
    out.set(e.path, Buffer.from(await collect(await p.read(e.path))).toString('utf8'));
  }
  return out;
}

export function text(s: string): Uint8Array {
  return new TextEncoder().encode(s);
}

export async function readText(p: Provider, path: string): Promise<string> {
  return Buffer.from(await collect(await p.read(path))).toString('utf8');
}
