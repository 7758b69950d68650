/**
 * A single-request S3 put hashes its body once (issue #17): the SHA-256 it computes for
 * ChecksumSHA256 and the metadata is also the SigV4 payload hash, given to the signer as
 * x-amz-content-sha256 instead of the SDK hashing the body again. Against s3proxy, which
 * checks the signature.
 */
import crypto, { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, inject, it, vi } from 'vitest';
import { S3Provider } from '../src/adapters/s3.ts';
import { collect } from '../src/body.ts';

const s3 = inject('s3');

afterEach(() => vi.restoreAllMocks());

describe('s3 single put', () => {
  it('hashes the body once, and the object is stored with its SHA-256', async () => {
    const p = new S3Provider({
      ...s3,
      credentials: s3,
      prefix: `hash-once/${randomBytes(6).toString('hex')}`,
    });
    const data = randomBytes(3 * 1024 * 1024);
    let hashed = 0;
    const proto = (crypto as unknown as { Hash: { prototype: { update: (d: unknown) => unknown } } }).Hash
      .prototype;
    const update = proto.update;
    vi.spyOn(proto, 'update').mockImplementation(function (this: unknown, d: unknown, ...rest: unknown[]) {
      hashed += typeof d === 'string' ? d.length : (d as Uint8Array).byteLength;
      return (update as (...a: unknown[]) => unknown).call(this, d, ...rest);
    });
    const e = await p.write('one.bin', data);
    vi.restoreAllMocks();
    expect(hashed).toBeGreaterThanOrEqual(data.byteLength);
    expect(hashed).toBeLessThan(data.byteLength + 64 * 1024); // not twice
    const sha = crypto.createHash('sha256').update(data).digest('hex');
    expect(e.hash?.value).toBe(sha);
    expect((await p.stat('one.bin')).hash?.value).toBe(sha);
    expect((await collect(await p.read('one.bin'))).equals(data)).toBe(true);
    await p.close();
  });
});
