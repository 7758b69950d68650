import { createHash } from 'node:crypto';
import { type Provider, collect } from '@weft/providers';
import type { Timer } from '../src/clock.ts';

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

/**
 * A timer (clock.ts `Timer`) that records each wait asked for and ends it only when the
 * test says so: `nextWait()` resolves with the wait once one is pending, `fire()` ends the
 * oldest pending one. Tests of retry waits check the waits asked for, never elapsed time.
 */
export function manualTimer() {
  const asked: number[] = [];
  const due: (() => void)[] = [];
  let wake: (() => void) | undefined;
  const timer: Timer = (fn, ms) => {
    asked.push(ms);
    due.push(fn);
    wake?.();
    return () => {
      const i = due.indexOf(fn);
      if (i >= 0) due.splice(i, 1);
    };
  };
  /** Wait until a wait is pending; its length. */
  const nextWait = async (): Promise<number> => {
    while (due.length === 0) await new Promise<void>((r) => (wake = r));
    wake = undefined;
    return asked[asked.length - 1] ?? Number.NaN;
  };
  /** End the oldest pending wait now. */
  const fire = (): void => {
    const fn = due.shift();
    if (!fn) throw new Error('no wait pending');
    fn();
  };
  return { timer, asked, nextWait, fire, pending: () => due.length };
}
