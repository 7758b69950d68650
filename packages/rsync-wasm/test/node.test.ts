import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { collect, delta, OldReaderError, patch, signature } from '../src/index.ts';
import { openOldFile, patchToFile } from '../src/node.ts';
import { equalBytes, pseudoRandom } from './helpers.ts';

const dir = mkdtempSync(join(tmpdir(), 'rsync-wasm-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('openOldFile', () => {
  it('serves patch() from positioned reads, including ranges across its read-ahead window', async () => {
    const oldBytes = pseudoRandom(3_500_000, 9);
    const newBytes = oldBytes.slice();
    newBytes.set(pseudoRandom(5000, 1), 1_048_000);
    const path = join(dir, 'old.bin');
    writeFileSync(path, oldBytes);
    const sig = await collect(signature(oldBytes, { blockSize: 1000 }));
    const d = await collect(delta(sig, newBytes));
    const old = await openOldFile(path);
    try {
      expect(old.size).toBe(oldBytes.length);
      expect(equalBytes(await collect(patch(old, d)), newBytes)).toBe(true);
      expect(equalBytes(await old.read(1_048_570, 10), oldBytes.subarray(1_048_570, 1_048_580))).toBe(true);
      expect(equalBytes(await old.read(5, 3), oldBytes.subarray(5, 8))).toBe(true);
      await expect(old.read(oldBytes.length - 2, 5)).rejects.toBeInstanceOf(OldReaderError);
    } finally {
      await old.close();
    }
  });
});

describe('patchToFile', () => {
  it('writes the patched file and reports its size and SHA-256', async () => {
    const oldBytes = pseudoRandom(700_000, 3);
    const newBytes = oldBytes.slice(100_000);
    newBytes.set(pseudoRandom(3000, 4), 200_000);
    const sig = await collect(signature(oldBytes, { blockSize: 2048 }));
    const d = await collect(delta(sig, newBytes));
    const path = join(dir, 'patched.bin');
    const got = await patchToFile(oldBytes, d, path, { sync: true, maxOutputBytes: newBytes.length });
    expect(got).toEqual({
      size: newBytes.length,
      sha256: createHash('sha256').update(newBytes).digest('hex'),
    });
    expect(equalBytes(readFileSync(path), newBytes)).toBe(true);
  });

  it('removes the file when the output would pass maxOutputBytes', async () => {
    const oldBytes = pseudoRandom(100_000, 5);
    const sig = await collect(signature(oldBytes, { blockSize: 1024 }));
    const d = await collect(delta(sig, oldBytes));
    const path = join(dir, 'capped.bin');
    await expect(patchToFile(oldBytes, d, path, { maxOutputBytes: 99_999 })).rejects.toMatchObject({
      code: 'OUTPUT_TOO_LARGE',
    });
    expect(existsSync(path)).toBe(false);
  });
});
