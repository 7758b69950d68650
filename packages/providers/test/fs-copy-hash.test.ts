/**
 * A copy made by the fs provider carries the SHA-256s it already knows of the source: the
 * proxy stats every file it copies (for its revision), and each stat of a copy whose hash the
 * provider did not know read the whole file again to hash it — a folder copy read every byte
 * twice. Counted with hashedDuring (bytes given to SHA-256), not timed.
 */
import { createHash } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { FsProvider } from '../src/adapters/fs.ts';
import { hashedDuring } from './hashed-during.ts';

async function provider(): Promise<FsProvider> {
  const root = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-fs-copy-hash-'));
  const p = await FsProvider.open({ root });
  onTestFinished(async () => {
    await p.close();
    await fsp.rm(root, { recursive: true, force: true });
  });
  return p;
}

const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

describe('fs provider copy', () => {
  it('knows the hashes of a copied folder and file without reading them again', async () => {
    const p = await provider();
    const files = Array.from({ length: 20 }, (_, i) => Buffer.alloc(4096 + i, i));
    for (const [i, b] of files.entries()) await p.write(`d/sub/f${i}.bin`, b);
    await p.write('one.bin', files[3]!);
    const want = files.map(sha); // outside hashedDuring: the test's own hashing is not counted
    let copied: Awaited<ReturnType<FsProvider['copy']>>[] = [];
    const hashed = await hashedDuring(async () => {
      copied = [await p.copy('d', 'e'), await p.copy('one.bin', 'two.bin')];
      for (const i of files.keys()) expect((await p.stat(`e/sub/f${i}.bin`)).hash?.value).toBe(want[i]);
      expect((await p.stat('two.bin')).hash?.value).toBe(want[3]);
    });
    expect(hashed).toBe(0);
    expect(copied.map((e) => e.path)).toEqual(['e', 'two.bin']);
    expect(copied[1]?.hash?.value).toBe(want[3]);
  });

  it('hashes a copy whose source changed behind its back (the stale hash is not carried)', async () => {
    const p = await provider();
    await p.write('a.txt', Buffer.from('first'));
    await new Promise((r) => setTimeout(r, 5));
    await fsp.writeFile(nodePath.join(p.name.slice('fs:'.length), 'a.txt'), 'second!');
    await p.copy('a.txt', 'b.txt');
    expect((await p.stat('b.txt')).hash?.value).toBe(sha(Buffer.from('second!')));
  });
});
