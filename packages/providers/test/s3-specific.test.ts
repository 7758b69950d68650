import { randomBytes } from 'node:crypto';
import { ListMultipartUploadsCommand, ListObjectsV2Command } from '@aws-sdk/client-s3';
import { describe, expect, inject, it } from 'vitest';
import { S3Provider } from '../src/adapters/s3.ts';
import { collect } from '../src/body.ts';
import { NotFoundError } from '../src/errors.ts';

const s3 = inject('s3');

function provider(extra: Partial<ConstructorParameters<typeof S3Provider>[0]> = {}): S3Provider {
  return new S3Provider({
    ...s3,
    credentials: s3,
    prefix: `specific/${randomBytes(6).toString('hex')}`,
    ...extra,
  });
}

describe('s3 provider specifics', () => {
  it('removes a folder of more than 1000 keys in batches', async () => {
    const p = provider();
    const names = Array.from({ length: 1205 }, (_, i) => `big/f${i}`);
    for (let i = 0; i < names.length; i += 50) {
      await Promise.all(names.slice(i, i + 50).map((n) => p.write(n, Buffer.from('x'))));
    }
    await p.remove('big');
    await expect(p.stat('big')).rejects.toBeInstanceOf(NotFoundError);
    const left = await p.client.send(new ListObjectsV2Command({ Bucket: s3.bucket, Prefix: 'specific/' }));
    expect((left.Contents ?? []).filter((o) => o.Key?.includes('/big/'))).toEqual([]);
    await p.close();
  }, 120_000);

  it('uploads parts in parallel and aborts the upload when a part fails', async () => {
    const p = provider({ partSize: 5 * 1024 * 1024, partConcurrency: 3 });
    const data = randomBytes(23 * 1024 * 1024);
    const e = await p.write('parts.bin', data);
    expect(e.size).toBe(data.byteLength);
    expect((await collect(await p.read('parts.bin'))).equals(data)).toBe(true);
    // A source that fails after several parts are in flight.
    async function* failing(): AsyncIterable<Uint8Array> {
      yield data.subarray(0, 16 * 1024 * 1024);
      throw new Error('disk read error');
    }
    await expect(p.write('broken.bin', failing())).rejects.toThrow('disk read error');
    const uploads = await p.client.send(new ListMultipartUploadsCommand({ Bucket: s3.bucket }));
    expect(uploads.Uploads ?? []).toEqual([]);
    await expect(p.stat('broken.bin')).rejects.toBeInstanceOf(NotFoundError);
    await p.close();
  }, 120_000);

  it('stat reports the SHA-256 given for multipart uploads, and the one computed for single puts', async () => {
    const p = provider({ partSize: 5 * 1024 * 1024 });
    const { createHash } = await import('node:crypto');
    const big = randomBytes(11 * 1024 * 1024);
    const digest = createHash('sha256').update(big).digest('hex');
    await p.write('hashed.bin', big, { sha256: digest });
    expect((await p.stat('hashed.bin')).hash).toEqual({ algorithm: 'sha256', value: digest });
    await p.write('small.bin', Buffer.from('abc'));
    expect((await p.stat('small.bin')).hash?.value).toBe(createHash('sha256').update('abc').digest('hex'));
    await p.close();
  }, 120_000);

  it('skips keys written by other tools that break the path rules', async () => {
    const p = provider();
    await p.write('ok.txt', Buffer.from('ok'));
    const { PutObjectCommand } = await import('@aws-sdk/client-s3');
    const prefix = p.name.slice(p.name.indexOf('/') + 1);
    // A segment over 255 bytes: legal in S3 (keys go to 1024 bytes), refused by our rules.
    await p.client.send(
      new PutObjectCommand({ Bucket: s3.bucket, Key: `${prefix}${'x'.repeat(300)}`, Body: 'x' }),
    );
    await p.client.send(
      new PutObjectCommand({ Bucket: s3.bucket, Key: `${prefix}d/${'y'.repeat(256)}/z`, Body: 'x' }),
    );
    const listed = [];
    for await (const e of p.list('', { recursive: true })) listed.push(e.path);
    expect(listed).toEqual(['ok.txt']);
    await p.close();
  });
});
