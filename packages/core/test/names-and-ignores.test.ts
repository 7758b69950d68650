import { describe, expect, it } from 'vitest';
import { normalizePath } from '@weft/providers/paths';
import { conflictCopyPath, isConflictCopy, splitExtension } from '../src/conflict-name.ts';
import { IgnoreRules } from '../src/ignore-rules.ts';

const when = new Date(Date.UTC(2026, 10, 21, 19, 30, 45));

describe('conflicted copy names', () => {
  it('follows the familiar pattern and keeps the extension last', () => {
    expect(conflictCopyPath('docs/report.docx', 'laptop', when)).toBe(
      'docs/report (conflicted copy 2026-11-21 193045 from laptop).docx',
    );
    expect(conflictCopyPath('Makefile', 'pc', when)).toBe(
      'Makefile (conflicted copy 2026-11-21 193045 from pc)',
    );
    expect(conflictCopyPath('.bashrc', 'pc', when)).toBe(
      '.bashrc (conflicted copy 2026-11-21 193045 from pc)',
    );
    expect(splitExtension('a.tar.gz')).toEqual({ stem: 'a.tar', ext: '.gz' });
  });

  it('adds a counter when the name is taken and stays a valid path', () => {
    const first = conflictCopyPath('x.txt', 'dev', when);
    const second = conflictCopyPath('x.txt', 'dev', when, (c) => c === first);
    expect(second).toBe('x (conflicted copy 2026-11-21 193045 from dev 2).txt');
    expect(isConflictCopy(first)).toBe(true);
    expect(isConflictCopy(second)).toBe(true);
    expect(isConflictCopy('x.txt')).toBe(false);
  });

  it('sanitises hostile device names and never exceeds the segment limit', () => {
    const p = conflictCopyPath('a/' + 'ü'.repeat(120) + '.txt', '../evil/\0name', when);
    expect(normalizePath(p)).toBe(p);
    expect(p.startsWith('a/')).toBe(true);
    expect(p.split('/')).toHaveLength(2);
    expect(Buffer.byteLength(p.split('/')[1] ?? '')).toBeLessThanOrEqual(255);
  });
});

describe('ignore rules', () => {
  it('ignores the defaults people expect', () => {
    const r = new IgnoreRules();
    for (const p of [
      '.DS_Store',
      'sub/Thumbs.db',
      '~$report.docx',
      'a/b.tmp',
      '.~lock.file.odt#',
      'x/.weft',
    ]) {
      expect(r.ignores(p), p).toBe(true);
    }
    for (const p of ['report.docx', 'notes.txt', 'tmp/file', 'Thumbs.db.txt'])
      expect(r.ignores(p), p).toBe(false);
  });

  it('applies .weftignore rules relative to their folder, folders hiding their content', () => {
    const r = new IgnoreRules();
    r.setFolderRules('', 'build/\n*.log\n!keep.log');
    r.setFolderRules('proj', 'secret.txt\nnode_modules');
    expect(r.ignores('build', true)).toBe(true);
    expect(r.ignores('build/out.js')).toBe(true);
    expect(r.ignores('x/debug.log')).toBe(true);
    expect(r.ignores('keep.log')).toBe(false);
    expect(r.ignores('proj/secret.txt')).toBe(true);
    expect(r.ignores('secret.txt')).toBe(false);
    expect(r.ignores('proj/node_modules/a/b.js')).toBe(true);
    r.setFolderRules('proj', '');
    expect(r.ignores('proj/secret.txt')).toBe(false);
  });
});
