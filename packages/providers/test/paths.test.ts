import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { HOSTILE_PATHS } from '../src/conformance/index.ts';
import { InvalidPathError } from '../src/errors.ts';
import {
  ancestors,
  baseName,
  caseFoldKey,
  decodePathBytes,
  isWithin,
  joinPath,
  normalizeEntryPath,
  normalizePath,
  parentPath,
} from '../src/paths.ts';

describe('normalizePath', () => {
  it('accepts ordinary relative paths unchanged', () => {
    for (const p of ['a', 'a/b/c.txt', 'with space/x#y%z+w', '日本語/😀', '.hidden/.file', '...', 'a..b']) {
      expect(normalizePath(p)).toBe(p);
    }
    expect(normalizePath('')).toBe('');
  });

  it('normalises to NFC', () => {
    expect(normalizePath('cafe\u0301')).toBe('caf\u00e9');
    expect(normalizePath('A\u030a/x')).toBe('\u00c5/x');
  });

  it('rejects every hostile path with InvalidPathError', () => {
    for (const p of HOSTILE_PATHS)
      expect(() => normalizePath(p), JSON.stringify(p)).toThrow(InvalidPathError);
  });

  it('limits segments to 255 bytes and paths to 4096 bytes, counted in UTF-8', () => {
    expect(normalizePath('x'.repeat(255))).toHaveLength(255);
    expect(() => normalizePath('é'.repeat(128))).toThrow(/255 bytes/); // 256 bytes
    expect(normalizePath('é'.repeat(127))).toHaveLength(127);
    const ok = Array.from({ length: 16 }, () => 'y'.repeat(255)).join('/'); // 4095 bytes
    expect(normalizePath(ok)).toBe(ok);
    expect(() => normalizePath(ok + 'zz')).toThrow(/4096/);
  });

  it('applies Windows rules only when portable', () => {
    for (const p of [
      'CON',
      'nul.txt',
      'a/com1',
      'LPT9.log',
      'a:b',
      'q?',
      'star*',
      'pipe|',
      'trail.',
      'trail ',
      'back\\slash',
      'C:/x',
      'tab\there',
    ]) {
      expect(() => normalizePath(p, { portable: true }), p).toThrow(InvalidPathError);
    }
    expect(normalizePath('CON')).toBe('CON');
    expect(normalizePath('console.txt', { portable: true })).toBe('console.txt');
  });

  it('never accepts a path that escapes or is absolute (property)', () => {
    const segment = fc.oneof(
      fc.constantFrom('..', '.', '', 'a', 'b', '\0', '/'),
      fc.string({ maxLength: 6 }),
    );
    fc.assert(
      fc.property(fc.array(segment, { maxLength: 6 }), fc.boolean(), (segs, abs) => {
        const raw = (abs ? '/' : '') + segs.join('/');
        let out: string;
        try {
          out = normalizePath(raw);
        } catch (e) {
          expect(e).toBeInstanceOf(InvalidPathError);
          return;
        }
        expect(out.startsWith('/')).toBe(false);
        expect(out.includes('\0')).toBe(false);
        if (out !== '') expect(out.split('/').every((s) => s !== '' && s !== '.' && s !== '..')).toBe(true);
        expect(normalizePath(out)).toBe(out); // idempotent
      }),
      { numRuns: 5000 },
    );
  });

  it('normalizeEntryPath refuses the root', () => {
    expect(() => normalizeEntryPath('')).toThrow(InvalidPathError);
  });
});

describe('decodePathBytes', () => {
  it('decodes valid UTF-8 and rejects invalid UTF-8 without replacement', () => {
    expect(decodePathBytes(Buffer.from('ok/ü.txt'))).toBe('ok/ü.txt');
    for (const bad of [
      [0xff],
      [0xc3],
      [0xed, 0xa0, 0x80],
      [0x61, 0x80, 0x62],
      [0xf8, 0x88, 0x80, 0x80, 0x80],
    ]) {
      expect(() => decodePathBytes(Uint8Array.from(bad))).toThrow(InvalidPathError);
    }
  });
});

describe('path helpers', () => {
  it('compute parents, ancestors and containment', () => {
    expect(parentPath('a/b/c')).toBe('a/b');
    expect(parentPath('a')).toBe('');
    expect(baseName('a/b/c')).toBe('c');
    expect(ancestors('a/b/c')).toEqual(['a', 'a/b']);
    expect(ancestors('a')).toEqual([]);
    expect(joinPath('', 'a', 'b/c')).toBe('a/b/c');
    expect(isWithin('a/b', 'a')).toBe(true);
    expect(isWithin('a', 'a')).toBe(true);
    expect(isWithin('ab', 'a')).toBe(false);
    expect(isWithin('x', '')).toBe(true);
  });

  it('case-folds names that clash on case-insensitive disks', () => {
    expect(caseFoldKey('Readme.TXT')).toBe(caseFoldKey('README.txt'));
    expect(caseFoldKey('Straße')).toBe(caseFoldKey('STRASSE'));
    expect(caseFoldKey('cafe\u0301')).toBe(caseFoldKey('CAF\u00c9'));
    expect(caseFoldKey('a')).not.toBe(caseFoldKey('b'));
  });
});
