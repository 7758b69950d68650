/**
 * The hand-written checks of bundle results and feed messages (src/fast-check.ts) accept
 * nothing their zod schema refuses and return what it would: for a valid answer and for
 * every variant of it with one field removed, retyped or set out of range, or one key
 * added, the check and the schema agree — the same value, or the same error. And the common
 * answers are checked by hand, not by zod (counted).
 */
import { describe, expect, it } from 'vitest';
import {
  BundleUploadResponse,
  BundleUploadResponseCheck,
  FeedServerMessage,
  FeedServerMessageCheck,
  fastChecks,
} from '../src/index.ts';

const SHA = 'a'.repeat(64);
const entry = (path: string) => ({
  path,
  kind: 'file',
  size: 12,
  mtimeMs: 1_700_000_000_000,
  revision: 'r-1',
  sha256: SHA,
  tier: 'small',
});
const bundleAnswer = () => ({
  results: [
    { path: 'a/b.txt', result: { status: 'applied', entry: entry('a/b.txt'), seq: 4 } },
    { path: 'a/c.txt', result: { status: 'applied', seq: 0 } },
  ],
});
const feedAnswer = () => ({
  type: 'changes',
  cursor: 9,
  changes: [
    { seq: 7, type: 'upsert', path: 'a/b.txt', entry: entry('a/b.txt'), device: 'd1', deviceName: 'laptop' },
    { seq: 8, type: 'delete', path: 'a/c.txt' },
    {
      seq: 9,
      type: 'move',
      from: 'x',
      path: 'y',
      entry: { ...entry('y'), kind: 'dir', sha256: undefined, tier: undefined },
    },
  ],
});

/** Strip undefined-valued keys, as JSON would. */
const json = <T>(v: T): T => JSON.parse(JSON.stringify(v)) as T;

const BAD_VALUES: unknown[] = [
  undefined,
  null,
  -1,
  1.5,
  2 ** 53,
  '',
  'x',
  '/abs',
  'a//b',
  '../up',
  'cafe\u0301',
  'A'.repeat(64),
  'r 1',
  'upsert',
  'applied',
  'conflict',
  'dir',
  'large',
  [],
  {},
  true,
];

/** Every variant of `v` with one field at any depth deleted, set to another value, or a key added. */
function* variants(v: unknown): Generator<unknown> {
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++)
      for (const w of variants(v[i])) yield v.map((x, j) => (j === i ? w : x));
    yield [];
    return;
  }
  if (typeof v !== 'object' || v === null) {
    yield* BAD_VALUES;
    return;
  }
  const o = v as Record<string, unknown>;
  yield { ...o, extra: 1 };
  for (const k of Object.keys(o)) {
    const { [k]: _, ...rest } = o;
    yield rest;
    for (const w of variants(o[k])) yield { ...o, [k]: w };
  }
}

function outcome(parse: () => unknown): { ok: unknown } | { error: string } {
  try {
    return { ok: parse() };
  } catch (e) {
    return { error: (e as Error).message };
  }
}

describe('hand-written answer checks', () => {
  it('take the common bundle and feed answers by hand, as the schemas would', () => {
    const before = { ...fastChecks };
    const b = json(bundleAnswer());
    expect(BundleUploadResponseCheck.parse(b)).toEqual(BundleUploadResponse.parse(b));
    const f = json(feedAnswer());
    expect(FeedServerMessageCheck.parse(f)).toEqual(FeedServerMessage.parse(f));
    expect([fastChecks.byHand - before.byHand, fastChecks.byZod - before.byZod]).toEqual([2, 0]);
  });

  it('agree with the zod schemas on every variant of a valid answer (value or error)', () => {
    const cases: [string, { parse(v: unknown): unknown }, { parse(v: unknown): unknown }, unknown][] = [
      ['bundle', BundleUploadResponseCheck, BundleUploadResponse, json(bundleAnswer())],
      ['feed', FeedServerMessageCheck, FeedServerMessage, json(feedAnswer())],
    ];
    let refused = 0;
    let byZod = 0;
    let tried = 0;
    for (const [, check, schema, valid] of cases) {
      for (const v of variants(valid)) {
        tried += 1;
        const z0 = fastChecks.byZod;
        const fast = outcome(() => check.parse(v));
        const slow = outcome(() => schema.parse(v));
        expect(fast).toEqual(slow);
        if ('error' in slow) refused += 1;
        if (fastChecks.byZod > z0) byZod += 1;
      }
    }
    // The variants reached both sides: most are refused, all of those by zod's own error.
    expect(tried).toBeGreaterThan(500);
    expect(refused).toBeGreaterThan(tried / 2);
    expect(byZod).toBeGreaterThanOrEqual(refused);
    // Answers the checks leave to zod still come back right: a conflict and an error result.
    const other = {
      results: [{ path: 'a', result: { status: 'error', error: { code: 'NOT_FOUND', message: 'gone' } } }],
    };
    expect(BundleUploadResponseCheck.parse(other)).toEqual(BundleUploadResponse.parse(other));
  });
});
