/**
 * The change feed (order, resume, a folder move), concurrent writers, the retry wrapper over
 * transient failures and broken reads, and SHA-256 verification of writes.
 */
import { randomBytes } from 'node:crypto';
import { expect } from 'vitest';
import { collect } from '../body.ts';
import { NotFoundError, TransientError } from '../errors.ts';
import { hasChangeFeed, hasServerSideMove } from '../features.ts';
import { FaultInjectingProvider, failFirst } from '../testing/faults.ts';
import { wrapProvider } from '../wrappers/compose.ts';
import { MiB, sha, readAll, chunked, expectReject, drainChanges, type SuiteContext } from './support.ts';

export function checkFeedAndFaults({ options, fresh, test }: SuiteContext): void {
  test('changeFeedOrderAndResume', async () => {
    const p = await fresh();
    if (!hasChangeFeed(p)) throw new Error('provider declares no change feed: declare the gap with a reason');
    const start = await p.latestCursor();
    const created = await p.write('feed/a.txt', Buffer.from('v1'));
    const modified = await p.write('feed/a.txt', Buffer.from('v2'));
    const first = await drainChanges(p, start);
    const fileChanges = first.changes.filter((c) => c.path === 'feed/a.txt');
    const revs = fileChanges.map((c) => (c.type === 'upsert' ? c.entry.revision : ''));
    if (options.coalescedChangeFeed === undefined) {
      expect(fileChanges.map((c) => c.type)).toEqual(['upsert', 'upsert']);
      expect(revs).toEqual([created.revision, modified.revision]);
    } else {
      expect(fileChanges.length).toBeGreaterThanOrEqual(1);
      expect(fileChanges.every((c) => c.type === 'upsert')).toBe(true);
      expect(revs.at(-1)).toBe(modified.revision);
    }
    // Resume from the saved cursor: only what happened after it, exactly once.
    const saved = first.cursor;
    await p.remove('feed/a.txt');
    await p.write('feed/b.txt', Buffer.from('b'));
    const second = await drainChanges(p, saved);
    const relevant = second.changes.filter((c) => c.path.startsWith('feed/'));
    expect(relevant.map((c) => `${c.type}:${c.path}`)).toEqual(['delete:feed/a.txt', 'upsert:feed/b.txt']);
    // Nothing new: an empty page, same position.
    const third = await drainChanges(p, second.cursor);
    expect(third.changes).toEqual([]);
    // A cursor that was never issued asks the caller to re-list.
    const bogus = await p.changes('not-a-cursor');
    expect(bogus.reset).toBe(true);
  });

  test('changeFeedFolderMove', async () => {
    const p = await fresh();
    if (!hasChangeFeed(p)) throw new Error('provider declares no change feed: declare the gap with a reason');
    if (!hasServerSideMove(p) || p.features.move !== 'files-and-folders')
      throw new Error('provider declares no folder move: declare the gap with a reason');
    await p.write('mv/a/sub/f.txt', Buffer.from('f'));
    await p.write('mv/a/sub/deep/g.txt', Buffer.from('g'));
    await p.mkdir('mv/a/sub/empty');
    const start = await p.latestCursor();
    await p.move('mv/a/sub', 'mv/b');
    const { changes } = await drainChanges(p, start);
    // The old path is deleted (a folder's delete implies its content)...
    const deletes = changes.filter((c) => c.type === 'delete').map((c) => c.path);
    expect(deletes.some((d) => d === 'mv/a/sub')).toBe(true);
    // ...and everything at the new one is reported, not only the folder itself.
    const upserts = new Set(changes.filter((c) => c.type === 'upsert').map((c) => c.path));
    for (const q of ['mv/b', 'mv/b/f.txt', 'mv/b/deep', 'mv/b/deep/g.txt', 'mv/b/empty'])
      expect(upserts.has(q), q).toBe(true);
    const moved = changes.find((c) => c.type === 'upsert' && c.path === 'mv/b/deep/g.txt');
    expect(moved?.type === 'upsert' && moved.entry.size).toBe(1);
  });

  test('concurrentWriters', async () => {
    const p = await fresh();
    const files = Array.from({ length: 16 }, (_, i) => ({
      path: `par/w${i}.bin`,
      data: randomBytes(200_000 + i),
    }));
    await Promise.all(files.map((f) => p.write(f.path, () => chunked(f.data, 50_000))));
    for (const f of files) expect(sha(await readAll(p, f.path))).toBe(sha(f.data));
  });

  test('retryRecoversFromTransient', async () => {
    const p = await fresh();
    const faulty = new FaultInjectingProvider(p, failFirst(3, ['write', 'stat'], 1234));
    const delays: number[] = [];
    const wrapped = wrapProvider(faulty, {
      retry: { maxAttempts: 5, sleep: async (ms) => void delays.push(ms), random: () => 0.5 },
    });
    await wrapped.write('retry.txt', Buffer.from('eventually'));
    expect((await readAll(p, 'retry.txt')).toString()).toBe('eventually');
    expect(delays).toEqual([1234, 1234, 1234]);
    expect(faulty.calls.filter((c) => c.failed)).toHaveLength(3);
    // Without Retry-After: exponential backoff with full jitter (random 0.5 → half the ceiling).
    const faulty2 = new FaultInjectingProvider(p, failFirst(3, ['stat']));
    const delays2: number[] = [];
    const wrapped2 = wrapProvider(faulty2, {
      retry: {
        maxAttempts: 5,
        baseDelayMs: 100,
        sleep: async (ms) => void delays2.push(ms),
        random: () => 0.5,
      },
    });
    expect((await wrapped2.stat('retry.txt')).size).toBe(10);
    expect(delays2).toEqual([50, 100, 200]);
    // A consumed stream cannot be re-sent: the error surfaces after one attempt.
    const faulty3 = new FaultInjectingProvider(p, failFirst(1, ['write']));
    const wrapped3 = wrapProvider(faulty3, { retry: { sleep: async () => undefined } });
    await expectReject(wrapped3.write('once.txt', chunked(Buffer.from('x'), 1)), TransientError);
    // Attempts are capped.
    const faulty4 = new FaultInjectingProvider(p, failFirst(10, ['stat']));
    const wrapped4 = wrapProvider(faulty4, { retry: { maxAttempts: 4, sleep: async () => undefined } });
    await expectReject(wrapped4.stat('retry.txt'), TransientError);
    expect(faulty4.calls).toHaveLength(4);
    // An abort during the backoff stops retrying.
    const controller = new AbortController();
    const faulty5 = new FaultInjectingProvider(p, failFirst(10, ['stat']));
    const wrapped5 = wrapProvider(faulty5, {
      retry: {
        sleep: async () => {
          controller.abort(new Error('stop'));
          throw new Error('stop');
        },
      },
    });
    await expect(wrapped5.stat('retry.txt', { signal: controller.signal })).rejects.toThrow('stop');
    expect(faulty5.calls).toHaveLength(1);
  });

  test('retryResumesBrokenRead', async () => {
    const p = await fresh();
    const data = randomBytes(3 * MiB);
    await p.write('big.bin', data);
    const faulty = new FaultInjectingProvider(p, {
      breakReadAfterBytes: (i) => (i === 0 ? MiB + 7 : i === 1 ? MiB : undefined),
    });
    const wrapped = wrapProvider(faulty, { retry: { sleep: async () => undefined } });
    const back = await collect(await wrapped.read('big.bin'));
    expect(sha(back)).toBe(sha(data));
    const part = await collect(await wrapped.read('big.bin', { offset: 100, length: 2 * MiB }));
    expect(part.equals(data.subarray(100, 100 + 2 * MiB))).toBe(true);
  });

  test('sha256Verified', async () => {
    const p = await fresh();
    const data = Buffer.from('content with a known digest');
    const wrong = sha(Buffer.from('something else'));
    await expect(p.write('v.txt', data, { sha256: wrong })).rejects.toThrow();
    await expectReject(p.stat('v.txt'), NotFoundError);
    const ok = await p.write('v.txt', data, { sha256: sha(data) });
    expect(ok.size).toBe(data.byteLength);
  });
}
