/** Path arithmetic on a share's relative paths ('' is the share's root). Pure. */
import { createHash } from 'node:crypto';

/** `path` is `dir` or inside it ('' contains everything). */
export function isUnder(path: string, dir: string): boolean {
  return dir === '' || path === dir || path.startsWith(dir + '/');
}

/** `path` (at or under `from`) moved to `to`. */
export function rebase(path: string, from: string, to: string): string {
  return path === from ? to : to + path.slice(from.length);
}

/** Every ancestor of `key` and `key` itself ('a/b/c' → 'a', 'a/b', 'a/b/c'). */
export function* prefixes(key: string): Iterable<string> {
  for (let i = key.indexOf('/'); i >= 0; i = key.indexOf('/', i + 1)) yield key.slice(0, i);
  yield key;
}

/** `p` relative to `base` ('' for `base` itself); `p` must be under `base`. */
export function relativeTo(p: string, base: string): string {
  return p === base ? '' : p.slice(base.length + 1);
}

export function sha256Hex(data: Uint8Array): string {
  return createHash('sha256').update(data).digest('hex');
}
