/**
 * Writes: round trips of every size class (zero bytes to a 20 MiB multipart), streams of
 * unknown length, overwrite, and writes that fail, are aborted or carry the wrong size
 * leaving nothing behind.
 */
import { randomBytes } from 'node:crypto';
import { expect } from 'vitest';
import { NotFoundError } from '../errors.ts';
import { MiB, sha, readAll, chunked, failingStream, expectReject, type SuiteContext } from './support.ts';

export function checkWrites({ options, fresh, test }: SuiteContext): void {
  const roundTrip = async (size: number, chunkSize?: number): Promise<void> => {
    const p = await fresh();
    const data = randomBytes(size);
    const entry = await p.write('dir/file.bin', chunkSize ? () => chunked(data, chunkSize) : data, {
      size,
    });
    expect(entry.kind).toBe('file');
    expect(entry.size).toBe(size);
    expect(entry.path).toBe('dir/file.bin');
    expect(entry.revision).not.toBe('');
    const stat = await p.stat('dir/file.bin');
    expect(stat.size).toBe(size);
    expect(stat.revision).toBe(entry.revision);
    if (stat.hash?.algorithm === 'sha256') expect(stat.hash.value).toBe(sha(data));
    const back = await readAll(p, 'dir/file.bin');
    expect(back.byteLength).toBe(size);
    expect(sha(back)).toBe(sha(data));
    if (options.danglingUploads) expect(await options.danglingUploads()).toBe(0);
  };

  test('putZeroLength', () => roundTrip(0));
  test('putOneByte', () => roundTrip(1));
  test('putFiveMiBPlusOne', () => roundTrip(5 * MiB + 1, 1 * MiB));
  test('putTwentyMiBMultipart', () => roundTrip(20 * MiB, 3 * MiB + 17));

  test('putStreamUnknownLength', async () => {
    const p = await fresh();
    const data = randomBytes(3 * MiB + 5);
    await p.write('stream.bin', chunked(data, 64 * 1024 + 3));
    expect(sha(await readAll(p, 'stream.bin'))).toBe(sha(data));
  });

  test('overwriteReplacesContent', async () => {
    const p = await fresh();
    const a = await p.write('f.txt', Buffer.from('first version'));
    const b = await p.write('f.txt', Buffer.from('second'));
    expect(b.revision).not.toBe(a.revision);
    expect((await readAll(p, 'f.txt')).toString()).toBe('second');
    expect((await p.stat('f.txt')).size).toBe(6);
  });

  test('failedPutLeavesNothing', async () => {
    const p = await fresh();
    const data = randomBytes(12 * MiB);
    await expect(p.write('fail/small.bin', failingStream(data, 1000))).rejects.toThrow();
    await expect(p.write('fail/large.bin', failingStream(data, 11 * MiB))).rejects.toThrow();
    await expectReject(p.stat('fail/small.bin'), NotFoundError);
    await expectReject(p.stat('fail/large.bin'), NotFoundError);
    // An existing file survives a failed overwrite unchanged.
    await p.write('keep.txt', Buffer.from('precious'));
    await expect(p.write('keep.txt', failingStream(data, 9 * MiB))).rejects.toThrow();
    expect((await readAll(p, 'keep.txt')).toString()).toBe('precious');
    if (options.danglingUploads) expect(await options.danglingUploads()).toBe(0);
  });

  test('abortedPutLeavesNothing', async () => {
    const p = await fresh();
    const controller = new AbortController();
    const data = randomBytes(10 * MiB);
    async function* slowThenAbort(): AsyncIterable<Uint8Array> {
      yield data.subarray(0, 9 * MiB);
      controller.abort(new Error('user cancelled'));
      yield data.subarray(9 * MiB);
    }
    await expect(p.write('aborted.bin', slowThenAbort(), { signal: controller.signal })).rejects.toThrow();
    await expectReject(p.stat('aborted.bin'), NotFoundError);
    if (options.danglingUploads) expect(await options.danglingUploads()).toBe(0);
  });

  test('wrongSizeLeavesNothing', async () => {
    const p = await fresh();
    await expect(p.write('short.bin', Buffer.from('12345'), { size: 10 })).rejects.toThrow();
    await expectReject(p.stat('short.bin'), NotFoundError);
  });
}
