import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { DropboxContentHasher, dropboxContentHash, quickXorHash, QuickXorHasher } from '../src/hashes.ts';

describe('quickXorHash', () => {
  it('matches the published vectors', () => {
    expect(quickXorHash(Buffer.from('hello world'))).toBe('aCgDG9jwBhDc4Q1yawMZAAAAAAA=');
    expect(quickXorHash(Buffer.alloc(0))).toBe('AAAAAAAAAAAAAAAAAAAAAAAAAAA=');
  });

  it('is the same however the input is split', () => {
    const data = Buffer.from(Array.from({ length: 1000 }, (_, i) => (i * 7919) & 0xff));
    const h = new QuickXorHasher();
    for (let i = 0; i < data.length; i += 37) h.update(data.subarray(i, i + 37));
    expect(h.digestBase64()).toBe(quickXorHash(data));
  });
});

describe('dropboxContentHash', () => {
  it('is SHA-256 over the SHA-256s of 4 MiB blocks', () => {
    const block = 4 * 1024 * 1024;
    const data = Buffer.alloc(block + 10, 7);
    const expected = createHash('sha256')
      .update(createHash('sha256').update(data.subarray(0, block)).digest())
      .update(createHash('sha256').update(data.subarray(block)).digest())
      .digest('hex');
    expect(dropboxContentHash(data)).toBe(expected);
    const h = new DropboxContentHasher();
    for (let i = 0; i < data.length; i += 1_000_003) h.update(data.subarray(i, i + 1_000_003));
    expect(h.digestHex()).toBe(expected);
    expect(dropboxContentHash(Buffer.alloc(0))).toBe(createHash('sha256').digest('hex'));
  });
});
