/**
 * Helpers the conformance checks share: hashing, reading and listing whole, streams that
 * arrive in pieces or fail, expected refusals, draining a change feed, the hostile paths,
 * and the context a group of checks registers its tests through.
 */
import { createHash } from 'node:crypto';
import { expect } from 'vitest';
import { collect } from '../body.ts';
import { hasChangeFeed } from '../features.ts';
import type { Change, Entry, Provider } from '../provider.ts';
import type { ConformanceOptions, ConformanceTest } from './index.ts';

export const MiB = 1024 * 1024;

export function sha(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

export async function readAll(p: Provider, path: string, offset?: number, length?: number): Promise<Buffer> {
  return collect(await p.read(path, { offset, length }));
}

export async function listAll(p: Provider, dir = '', recursive = false, pageSize?: number): Promise<Entry[]> {
  const out: Entry[] = [];
  for await (const e of p.list(dir, { recursive, pageSize })) out.push(e);
  return out;
}

export async function* chunked(data: Uint8Array, size: number): AsyncIterable<Uint8Array> {
  for (let i = 0; i < data.byteLength; i += size) yield data.subarray(i, i + size);
}

export async function* failingStream(data: Uint8Array, failAfter: number): AsyncIterable<Uint8Array> {
  const chunk = 256 * 1024;
  for (let i = 0; i < failAfter; i += chunk) yield data.subarray(i, Math.min(failAfter, i + chunk));
  throw new Error('source failed mid-stream');
}

export async function expectReject<T extends Error>(
  promise: Promise<unknown>,
  type: abstract new (...args: never[]) => T,
): Promise<T> {
  try {
    await promise;
  } catch (e) {
    expect(e, `expected ${type.name}, got ${String(e)}`).toBeInstanceOf(type);
    return e as T;
  }
  throw new Error(`expected ${type.name}, but the call succeeded`);
}

export async function drainChanges(
  p: Provider,
  cursor: string,
): Promise<{ changes: Change[]; cursor: string }> {
  if (!hasChangeFeed(p)) throw new Error('no change feed');
  const all: Change[] = [];
  let c = cursor;
  for (;;) {
    const page = await p.changes(c);
    expect(page.reset).toBe(false);
    all.push(...page.changes);
    c = page.cursor;
    if (!page.hasMore) return { changes: all, cursor: c };
  }
}

export const HOSTILE_PATHS: readonly string[] = [
  '..',
  '../escape',
  'a/../../escape',
  'a/./b',
  '/etc/passwd',
  '/',
  'a//b',
  'a/',
  'nul\0byte',
  'x'.repeat(256),
  ('d'.repeat(200) + '/').repeat(21) + 'f',
  'lone\uD800surrogate',
  'trailing\uDC00',
];

/** What a group of checks gets from runProviderConformance. */
export interface SuiteContext {
  readonly options: ConformanceOptions;
  /** A provider over a fresh namespace, closed after the test. */
  readonly fresh: () => Promise<Provider>;
  /** Register one named check (skipped with its reason when the provider declares the gap). */
  readonly test: (name: ConformanceTest, fn: () => Promise<void>) => void;
}
