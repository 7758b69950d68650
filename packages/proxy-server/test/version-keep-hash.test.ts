/**
 * Putting versions aside looks up each content's kept copy (store/version-keep.ts) only to
 * learn that it is there; the fs tier's `stat` hashes the whole file when its hash has left
 * the provider's bounded hash cache (10,000 entries in the proxy), so deleting a folder of
 * more kept files than that read every one of them again (issue #16). Scaled down: a cache of
 * 20 entries and 60 kept files, kept once, then put aside again (the folder deleted after
 * being restored): the second pass must read no file to hash it (real fs tier; hash reads
 * counted by the provider).
 */
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { createHash } from 'node:crypto';
import { FsProvider } from '@weft/providers';
import { describe, expect, it, onTestFinished } from 'vitest';
import type { EntryRow } from '../src/store/metadata.ts';
import { keepVersionContent, readVersionContent } from '../src/store/version-keep.ts';

const FILES = 60;
const CACHE = 20;

describe('kept versions: the lookup of a kept copy reads no file', () => {
  it('puts a folder of more kept files than the hash cache holds aside twice, hashing none', async () => {
    const root = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-version-keep-'));
    const fs = await FsProvider.open({ root, portable: false, changeFeed: false, hashCacheEntries: CACHE });
    onTestFinished(async () => {
      await fs.close();
      await fsp.rm(root, { recursive: true, force: true });
    });
    const bytes = new Map<string, Buffer>();
    const rows: EntryRow[] = [];
    for (let i = 0; i < FILES; i++) {
      const b = Buffer.from(`kept file ${i} `.repeat(50));
      const sha256 = createHash('sha256').update(b).digest('hex');
      bytes.set(sha256, b);
      rows.push({
        path: `d/f${i}`,
        kind: 'file',
        size: b.byteLength,
        mtimeMs: 1,
        revision: `r${i}`,
        sha256,
        tier: 'small',
        fsRevision: 'x',
      } as EntryRow);
    }
    let reads = 0;
    const deps = {
      fs,
      pin: () => () => undefined,
      readAll: async (_u: string, e: { sha256?: string | null }) => {
        reads += 1;
        return bytes.get(e.sha256!)!;
      },
      stageObject: () => Promise.reject(new Error('no large files here')),
    };
    (await keepVersionContent(deps, 'u', rows))();
    expect(reads).toBe(FILES);
    const before = fs.hashReads;
    (await keepVersionContent(deps, 'u', rows))();
    expect(reads).toBe(FILES); // every copy found kept: none read or written again
    expect(fs.hashReads - before).toBe(0);
    // And the kept bytes read back.
    const v = rows[0]!;
    const { content } = await readVersionContent(deps, {
      sha256: v.sha256!,
      size: v.size,
      tier: 'small',
    } as never);
    expect('bytes' in content && Buffer.from(content.bytes)).toEqual(bytes.get(v.sha256!));
  });
});
