import { randomBytes, createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GDriveEmulator } from '@weft/cloud-emulators/gdrive';
import { GDriveProvider } from '../src/adapters/gdrive.ts';
import { collect } from '../src/body.ts';
import { NotFoundError } from '../src/errors.ts';

let emu: GDriveEmulator;
beforeAll(async () => {
  emu = await new GDriveEmulator().start();
});
afterAll(() => emu.close());

const fresh = (extra: { chunkSize?: number } = {}): GDriveProvider =>
  new GDriveProvider({
    token: emu.accessToken,
    root: `specific/${randomBytes(4).toString('hex')}`,
    rootUrl: emu.url,
    ...extra,
  });
const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');

describe('gdrive adapter specifics', () => {
  it('duplicate names: the oldest item owns the path; the others are neither listed nor touched', async () => {
    const p = fresh();
    await p.write('dup/keep.txt', Buffer.from('placeholder'));
    const keep = emu.tree.resolve(`/${p.name.split('/').slice(1).join('/')}/dup/keep.txt`);
    expect(keep).toBeDefined();
    const folder = emu.tree.get(keep?.parentId ?? '');
    if (!folder || !keep) throw new Error('setup');
    // Another client adds two more items named "same.txt"; the first created is older.
    const older = emu.tree.create(folder, 'same.txt', 'file', Buffer.from('older'), {
      meta: { headRevisionId: 'r-old' },
    });
    const newer = emu.tree.create(folder, 'same.txt', 'file', Buffer.from('newer!'), {
      meta: { headRevisionId: 'r-new' },
    });
    newer.createdMs = older.createdMs + 1000;
    const listed = [];
    for await (const e of p.list('dup')) listed.push(e.path);
    expect(listed.sort()).toEqual(['dup/keep.txt', 'dup/same.txt']);
    expect((await collect(await p.read('dup/same.txt'))).toString()).toBe('older');
    await p.write('dup/same.txt', Buffer.from('updated'));
    expect(older.content.toString()).toBe('updated');
    expect(newer.content.toString()).toBe('newer!');
  });

  it('keeps its path ↔ id cache right when another client moves, deletes and re-creates', async () => {
    const p = fresh();
    await p.write('a/file.txt', Buffer.from('v1'));
    expect((await p.stat('a/file.txt')).size).toBe(2);
    const node = emu.tree.resolve(`/${p.name.split('/').slice(1).join('/')}/a/file.txt`);
    if (!node) throw new Error('setup');
    const parent = emu.tree.get(node.parentId ?? '');
    if (!parent) throw new Error('setup');
    emu.tree.move(node, parent, 'renamed.txt');
    await expect(p.stat('a/file.txt')).rejects.toBeInstanceOf(NotFoundError);
    expect((await p.stat('a/renamed.txt')).size).toBe(2);
    emu.tree.remove(node);
    emu.tree.create(parent, 'renamed.txt', 'file', Buffer.from('recreated'), {
      meta: { headRevisionId: 'x' },
    });
    expect((await collect(await p.read('a/renamed.txt'))).toString()).toBe('recreated');
  });

  it('resumable uploads resume from the session status after dropped chunks', async () => {
    const p = fresh({ chunkSize: 256 * 1024 });
    const data = randomBytes(5 * 256 * 1024 + 123);
    emu.faults.add({
      endpoint: 'files.upload.resumable',
      nth: [1],
      action: { kind: 'reset', when: 'after' },
    });
    emu.faults.add({
      endpoint: 'files.upload.resumable',
      nth: [4],
      action: { kind: 'reset', when: 'before' },
    });
    emu.faults.add({ endpoint: 'files.upload.resumable', nth: [6], action: { kind: 'status', status: 503 } });
    try {
      const e = await p.write('big.bin', data, { size: data.byteLength });
      expect(e.hash?.value).toBe(sha(data));
    } finally {
      emu.faults.clear();
    }
    expect(sha(await collect(await p.read('big.bin')))).toBe(sha(data));
    expect(emu.openSessions()).toBe(0);
    expect(emu.requestLog.some((r) => r.endpoint === 'files.upload.resumable')).toBe(true);
  });

  it('reports moves by another client as delete + upsert, and resets after expiry', async () => {
    const p = fresh();
    await p.write('m/x.txt', Buffer.from('x'));
    const cursor = await p.latestCursor();
    const node = emu.tree.resolve(`/${p.name.split('/').slice(1).join('/')}/m/x.txt`);
    if (!node?.parentId) throw new Error('setup');
    emu.tree.move(node, emu.tree.get(node.parentId) as NonNullable<typeof node>, 'y.txt');
    const page = await p.changes(cursor);
    expect(page.changes.map((c) => `${c.type}:${c.path}`)).toEqual(['delete:m/x.txt', 'upsert:m/y.txt']);
    emu.expireCursors();
    const reset = await p.changes(page.cursor);
    expect(reset.reset).toBe(true);
    expect(reset.changes).toEqual([]);
  });
});
