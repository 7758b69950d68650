import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { collect, delta, OldReaderError, patch, signature } from '../src/index.ts';
import { openOldFile } from '../src/node.ts';
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
