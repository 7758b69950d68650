import { describe, expect, it } from 'vitest';
import { Blake2b256 } from '../src/engine.ts';

const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');

async function hash(parts: Uint8Array[]): Promise<string> {
  const h = await Blake2b256.create();
  for (const p of parts) h.update(p);
  return hex(h.digest());
}

describe('BLAKE2b-256 (RFC 7693, 32-byte digest)', () => {
  const seq = Uint8Array.from({ length: 1000 }, (_, i) => i % 251);

  it('matches reference vectors', async () => {
    expect(await hash([])).toBe('0e5751c026e543b2e8ab2eb06099daa1d1e5df47778f7787faab45cdf12fe3a8');
    expect(await hash([new TextEncoder().encode('abc')])).toBe(
      'bddd813c634239723171ef3fee98579b94964e3bb1cb3e427262c8c068d52319',
    );
    expect(await hash([new Uint8Array(128)])).toBe(
      '378d0caaaa3855f1b38693c1d6ef004fd118691c95c959d4efa950d6d6fcf7c1',
    );
    expect(await hash([new Uint8Array(129)])).toBe(
      'baadfb64c3bd2cd187b54accc5e61a0720ed86bf48c28017873536cf9015d1b8',
    );
    expect(await hash([seq])).toBe('b372d0608f720c8c3dd41e9c8eecb10143b41abe520b616607e754bf79c08331');
  });

  it('gives the same digest however the input is split', async () => {
    for (const cut of [1, 127, 128, 129, 256, 500, 999]) {
      expect(await hash([seq.subarray(0, cut), seq.subarray(cut)])).toBe(
        'b372d0608f720c8c3dd41e9c8eecb10143b41abe520b616607e754bf79c08331',
      );
    }
  });
});
