/**
 * A standalone proxy under the common umask 022 (issue #14): everything it creates under its
 * data directory — the directory itself, the SQLite files (-wal, -shm), the filesystem tier,
 * the object tier, staging, the relay cache, the mirror's database and key — is owner-only:
 * folders 0700, files 0600. Another local user can read none of it.
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeTransferBlock, type TransferState } from '@weft/wire';
import { pseudoRandom, sha, startTestServer, tempDir, TestClient } from './helpers.ts';

const MiB = 1024 * 1024;

/** Every path under `root` (root included) whose mode is not owner-only. */
async function notPrivate(root: string): Promise<string[]> {
  const bad: string[] = [];
  const check = async (p: string): Promise<void> => {
    const st = await fsp.lstat(p);
    const mode = st.mode & 0o777;
    const want = st.isDirectory() ? 0o700 : 0o600;
    if (mode !== want) bad.push(`${nodePath.relative(root, p) || '.'} ${mode.toString(8)}`);
    if (st.isDirectory()) for (const n of await fsp.readdir(p)) await check(nodePath.join(p, n));
  };
  await check(root);
  return bad;
}

let oldUmask: number;
let parent: string;
let server: Awaited<ReturnType<typeof startTestServer>>;

beforeAll(async () => {
  oldUmask = process.umask(0o022);
  parent = await tempDir('weft-modes-');
  server = await startTestServer({ dataDir: nodePath.join(parent, 'data') });
});
afterAll(async () => {
  await server.stop();
  await fsp.rm(parent, { recursive: true, force: true });
  process.umask(oldUmask);
});

describe('file modes', () => {
  it('createsEverythingOwnerOnlyWhateverTheUmask', async () => {
    expect(process.umask()).toBe(0o022);
    const c = await TestClient.enrol(server, 'modes');
    await c.putSmall({ 'deep/er/small.txt': 'a small file', 'top.txt': 'x' });
    // A large file through a transfer: staging, then the object tier and a link file.
    const data = pseudoRandom(3 * MiB, 1);
    const t = await c.json<TransferState>('POST', '/v1/transfers', {
      path: 'big/large.bin',
      size: data.length,
      sha256: sha(data),
      mtimeMs: 1,
    });
    await c.json(
      'PUT',
      `/v1/transfers/${t.transferId}/blocks`,
      encodeTransferBlock({
        transferId: t.transferId,
        seq: 0,
        offset: 0,
        last: false,
        payload: data.subarray(0, MiB),
      }),
    );
    // Mid-transfer: the staging file exists now.
    expect(await notPrivate(server.dir)).toEqual([]);
    await c.json(
      'PUT',
      `/v1/transfers/${t.transferId}/blocks`,
      encodeTransferBlock({
        transferId: t.transferId,
        seq: 1,
        offset: MiB,
        last: true,
        payload: data.subarray(MiB),
      }),
    );
    const [r] = await c.ops({
      op: 'commit',
      path: 'big/large.bin',
      transferId: t.transferId,
      sha256: sha(data),
      size: data.length,
      mtimeMs: 1,
    });
    expect(r?.status).toBe('applied');
    // Reading it back stages it in the relay cache.
    expect(sha(await c.bytes('big/large.bin'))).toBe(sha(data));
    const names = await fsp.readdir(server.dir);
    expect(names).toEqual(
      expect.arrayContaining(['metadata.sqlite', 'metadata.sqlite-wal', 'fs', 'objects']),
    );
    expect(await notPrivate(server.dir)).toEqual([]);
  });
});
