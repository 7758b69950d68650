/**
 * The redundant tier's CPU per byte on S3 backends (issue #17): a striped write hashes each
 * object byte only as often as the tier's own checksums need — the S3 provider neither
 * hashes a fragment nor signs its payload (WriteOptions.callerVerifies), and a fragment's
 * checksum is over its shards' checksums (format version 2) — and since S3 then
 * checks no payload hash, a fragment damaged on its backend is still caught by the tier's
 * shard checksums: reads come back whole and the scrub finds and repairs it. Five S3
 * backends (prefixes on the suite's s3proxy, which checks every signature).
 */
import { randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { S3Provider } from '../src/adapters/s3.ts';
import { collect } from '../src/body.ts';
import { blobKey, openRedundantProvider, type RedundantProvider, scrub } from '../src/redundant/index.ts';
import { hashedDuring } from './hashed-during.ts';

const s3 = inject('s3');
const KiB = 1024;
let tier: RedundantProvider | undefined;
afterAll(async () => {
  await tier?.close();
});

describe('redundant tier over S3: hashing per byte', () => {
  it('a striped write hashes only for the tier; a fragment damaged on S3 is caught and repaired', async () => {
    const dir = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-redundant-s3-hash-'));
    const run = randomBytes(6).toString('hex');
    const backends = [0, 1, 2, 3, 4].map((i) => ({
      id: `b${i}`,
      provider: new S3Provider({ ...s3, credentials: s3, prefix: `hashing/${run}/b${i}` }),
    }));
    tier = openRedundantProvider({
      backends,
      dir,
      thresholdBytes: 64 * KiB,
      k: 3,
      m: 2,
      maxShardBytes: 256 * KiB,
      probeIntervalMs: 0,
    });
    // 6 MiB + 5: 8 stripes of 3 × 256 KiB, fragments of 2 MiB + 64 bytes (single puts).
    const size = 6 * 1024 * KiB + 5;
    const data = randomBytes(size);
    const hashed = await hashedDuring(() => tier!.write('big.bin', data, { size }));
    // The object once (its content hash) and every shard once (k + m shards per k data):
    // 1 + 5/3 per object byte. Before callerVerifies the S3 provider hashed every fragment
    // again and SigV4 once more, and before fragment version 2 the fragment's checksum was a
    // pass of its own over the payload (1 + 4 × 5/3 in all).
    const shardBytes = (8 * 5 * 256 * KiB) / size;
    expect(hashed / size).toBeGreaterThan(1 + shardBytes - 0.01);
    expect(hashed / size).toBeLessThan(1 + shardBytes + 0.05);
    expect((await collect(await tier.read('big.bin'))).equals(data)).toBe(true);

    // Flip bytes in the middle of fragment 0's payload, on S3 (the server checks nothing).
    const id = (await tier.store.objectOf('big.bin'))!;
    const loc = (await tier.store.locations(id)).find((l) => l.slot === 0)!;
    const holder = backends.find((b) => b.id === loc.backend)!.provider;
    const key = blobKey({ id, layout: 'striped' }, 0);
    const frag = await collect(await holder.read(key));
    const at = 64 + 3 * 256 * KiB + 17;
    frag[at] = frag[at]! ^ 0xff;
    await holder.write(key, frag);
    expect((await collect(await tier.read('big.bin'))).equals(data)).toBe(true);
    const report = await scrub(tier);
    expect(report.corrupt).toBe(1);
    expect(report.repaired).toBe(1);
    expect((await scrub(tier)).corrupt).toBe(0);
    expect((await collect(await holder.read(key))).equals(frag)).toBe(false);
    expect((await collect(await tier.read('big.bin'))).equals(data)).toBe(true);
    await fsp.rm(dir, { recursive: true, force: true });
  });
});
