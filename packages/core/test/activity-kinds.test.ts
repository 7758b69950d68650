/**
 * Recent activity names what happened: a folder tree copied in (issue #19: `cp -r docs
 * core-src`) is folders and files added, never "moved"; a real rename is one move. And ignore
 * patterns changed in Settings apply to the running engine's next pass.
 */
import { describe, expect, it } from 'vitest';
import { FakeCloud } from './support/fake-cloud.ts';

describe('recent activity kinds', () => {
  it('lists new folders of a copied tree as uploaded, and a rename as moved', async () => {
    const cloud = new FakeCloud();
    try {
      const a = await cloud.addDevice('laptop');
      await a.write('core-src/a.ts', 'a');
      await a.write('core-src/sub/b.ts', 'b');
      await a.mkdir('core-src/empty');
      await a.sync();
      const recent = a.engine.getStatus().recent;
      const kinds = new Map(recent.map((r) => [r.path, r.kind]));
      expect(recent.filter((r) => r.kind === 'moved')).toEqual([]);
      for (const p of ['core-src', 'core-src/sub', 'core-src/empty']) expect(kinds.get(p), p).toBe('added');
      for (const p of ['core-src/a.ts', 'core-src/sub/b.ts']) expect(kinds.get(p), p).toBe('uploaded');

      await a.mv('core-src/sub', 'core-src/renamed');
      await a.sync();
      const after = a.engine.getStatus().recent.filter((r) => r.kind === 'moved');
      expect(after).toHaveLength(1);
      expect(after[0]?.path).toContain('core-src/renamed');
    } finally {
      await cloud.close();
    }
  });
});

describe('ignore patterns changed while running', () => {
  it('apply from the next pass: new matches stay local, what synced before stays on the server', async () => {
    const cloud = new FakeCloud();
    try {
      const a = await cloud.addDevice('laptop');
      await a.write('old.log', 'kept');
      await a.sync();
      a.engine.setIgnorePatterns(['*.log']);
      await a.write('new.log', 'local only');
      await a.write('note.txt', 'synced');
      await a.sync();
      const server = cloud.serverTree();
      expect([...server.keys()].sort()).toEqual(['note.txt', 'old.log']);
      a.engine.setIgnorePatterns([]);
      await a.sync();
      expect([...cloud.serverTree().keys()].sort()).toEqual(['new.log', 'note.txt', 'old.log']);
    } finally {
      await cloud.close();
    }
  });
});
