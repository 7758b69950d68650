/**
 * Fragment format versions (issue #17; docs/formats/fragment.md). Version 2, written now:
 * the header's checksum is the SHA-256 of the fragment's shard checksums (no pass over the
 * payload of its own). Version 1 fragments, whose checksum is the SHA-256 of the payload,
 * are still read, scrubbed (a flipped byte found) and rebuilt as version 1, so their
 * placement record stays true. Directory backends.
 */
import { createHash, randomBytes } from 'node:crypto';
import * as nodePath from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { FsProvider } from '../src/adapters/fs.ts';
import { collect } from '../src/body.ts';
import {
  blobKey,
  decodeFragmentHeader,
  encodeFragmentHeader,
  FRAGMENT_HEADER_BYTES,
  type RedundantProvider,
  scrub,
  shardListSha256,
} from '../src/redundant/index.ts';
import { redundantFsRig } from './redundant-fs-rig.ts';

const KiB = 1024;
const open: RedundantProvider[] = [];
afterEach(async () => {
  for (const t of open.splice(0)) await t.close().catch(() => undefined);
});

async function rig(): Promise<{ tier: RedundantProvider; dir: string; providers: FsProvider[] }> {
  const { tier, dir, providers } = await redundantFsRig('weft-fragment-versions-');
  open.push(tier);
  return { tier, dir, providers };
}

describe('fragment format versions', () => {
  it('writes version 3: no checksum in the header, the record is over the shard checksums', async () => {
    const { tier, providers } = await rig();
    const data = randomBytes(200 * KiB + 7);
    await tier.write('v3.bin', data);
    const id = (await tier.store.objectOf('v3.bin'))!;
    const obj = (await tier.store.object(id))!;
    for (const loc of await tier.store.locations(id)) {
      const p = providers[Number(loc.backend.slice(1))]!;
      const frag = await collect(await p.read(blobKey(obj, loc.slot)));
      const h = decodeFragmentHeader(frag);
      expect(h.version).toBe(3);
      expect(h.payloadSha256).toBeUndefined();
      expect(frag.subarray(20, 52).equals(Buffer.alloc(32))).toBe(true);
      const want = shardListSha256(obj.shard_sha!, obj.k + obj.m, loc.slot);
      expect(loc.blob_sha256).toBe(want.toString('hex'));
    }
    expect((await scrub(tier)).corrupt).toBe(0);
  });

  it('reads and scrubs version 2 fragments; a damaged one is rebuilt as version 3, same record', async () => {
    const { tier, providers } = await rig();
    const data = randomBytes(200 * KiB + 7);
    await tier.write('v2.bin', data);
    const id = (await tier.store.objectOf('v2.bin'))!;
    const obj = (await tier.store.object(id))!;
    // Turn the object into what version 2 wrote: the shard-list checksum in the header too.
    const locs = await tier.store.locations(id);
    for (const loc of locs) {
      const p = providers[Number(loc.backend.slice(1))]!;
      const key = blobKey(obj, loc.slot);
      const frag = await collect(await p.read(key));
      const sha = Buffer.from(loc.blob_sha256, 'hex');
      const h = { ...decodeFragmentHeader(frag), version: 2 as const, payloadSha256: sha };
      await p.write(key, Buffer.concat([encodeFragmentHeader(h), frag.subarray(FRAGMENT_HEADER_BYTES)]));
    }
    expect((await collect(await tier.read('v2.bin'))).equals(data)).toBe(true);
    expect(await scrub(tier)).toMatchObject({ corrupt: 0, missing: 0 });
    // A version 2 header that names another checksum than the record is corrupt.
    const loc = locs.find((l) => l.slot === 1)!;
    const p = providers[Number(loc.backend.slice(1))]!;
    const key = blobKey(obj, loc.slot);
    const before = await collect(await p.read(key));
    const bad = Buffer.from(before);
    const h = decodeFragmentHeader(bad);
    bad.set(encodeFragmentHeader({ ...h, payloadSha256: Buffer.alloc(32, 1) }), 0);
    await p.write(key, bad);
    expect(await scrub(tier)).toMatchObject({ corrupt: 1, repaired: 1 });
    const after = await collect(await p.read(key));
    expect(decodeFragmentHeader(after).version).toBe(3);
    expect(after.subarray(FRAGMENT_HEADER_BYTES).equals(before.subarray(FRAGMENT_HEADER_BYTES))).toBe(true);
    expect((await tier.store.locations(id)).find((l) => l.slot === 1)!.blob_sha256).toBe(loc.blob_sha256);
    expect(await scrub(tier)).toMatchObject({ corrupt: 0, missing: 0 });
    expect((await collect(await tier.read('v2.bin'))).equals(data)).toBe(true);
  });

  it('reads, scrubs and rebuilds version 1 fragments as version 1', async () => {
    const { tier, dir, providers } = await rig();
    const data = randomBytes(200 * KiB + 7);
    await tier.write('v1.bin', data);
    const id = (await tier.store.objectOf('v1.bin'))!;
    const obj = (await tier.store.object(id))!;
    // Turn the object into what version 1 wrote: v1 headers (payload SHA-256) on the
    // backends and that checksum in the placement record.
    const db = new Database(nodePath.join(dir, 'tier', 'placement.sqlite'));
    const locs = await tier.store.locations(id);
    for (const loc of locs) {
      const p = providers[Number(loc.backend.slice(1))]!;
      const key = blobKey(obj, loc.slot);
      const frag = await collect(await p.read(key));
      const payload = frag.subarray(FRAGMENT_HEADER_BYTES);
      const sha = createHash('sha256').update(payload).digest();
      const h = { ...decodeFragmentHeader(frag), version: 1 as const, payloadSha256: sha };
      await p.write(key, Buffer.concat([encodeFragmentHeader(h), payload]));
      db.prepare('UPDATE locations SET blob_sha256 = ? WHERE object_id = ? AND slot = ?').run(
        sha.toString('hex'),
        id,
        loc.slot,
      );
    }
    db.close();
    expect((await collect(await tier.read('v1.bin'))).equals(data)).toBe(true);
    expect(await scrub(tier)).toMatchObject({ corrupt: 0, missing: 0 });

    // A byte flipped in a v1 fragment: found, rebuilt — as version 1, with its old checksum.
    const loc = locs.find((l) => l.slot === 1)!;
    const p = providers[Number(loc.backend.slice(1))]!;
    const key = blobKey(obj, loc.slot);
    const before = await collect(await p.read(key));
    const bad = Buffer.from(before);
    const at = FRAGMENT_HEADER_BYTES + 40 * KiB + 3;
    bad[at] = bad[at]! ^ 0x01;
    await p.write(key, bad);
    expect((await collect(await tier.read('v1.bin'))).equals(data)).toBe(true);
    expect(await scrub(tier)).toMatchObject({ corrupt: 1, repaired: 1 });
    const after = await collect(await p.read(key));
    expect(after.equals(before)).toBe(true);
    expect(decodeFragmentHeader(after).version).toBe(1);
    expect(await scrub(tier)).toMatchObject({ corrupt: 0, missing: 0 });
  });
});
