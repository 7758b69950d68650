import { randomBytes, createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TreeNode } from '@weft/cloud-emulators';
import { GDriveEmulator } from '@weft/cloud-emulators/gdrive';
import { GDriveProvider } from '../src/adapters/gdrive.ts';
import { collect } from '../src/body.ts';
import { AlreadyExistsError, NotFoundError, PreconditionFailedError } from '../src/errors.ts';
import type { Entry } from '../src/provider.ts';

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

/** The emulator's node for a provider path. */
const nodeAt = (p: GDriveProvider, rel: string): TreeNode => {
  const n = emu.tree.resolve(`/${p.name.split('/').slice(1).join('/')}/${rel}`);
  if (!n) throw new Error(`setup: nothing at ${rel}`);
  return n;
};
/** Another client (say Drive's web UI) saves new content: a new revision, a new etag. */
const editElsewhere = (n: TreeNode, text: string): void => {
  emu.tree.setContent(n, Buffer.from(text));
  n.meta.headRevisionId = `web-${n.version}`;
};
function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve = (): void => undefined;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

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

  it('a folder another client moved away: paths below it are not reached through the cached id', async () => {
    const p = fresh();
    await p.write('a/b/x.txt', Buffer.from('x1'));
    await p.write('a/b/y.txt', Buffer.from('y1'));
    const xRev = (await p.stat('a/b/x.txt')).revision;
    // Someone moves "a" (with "b" inside) to the trash folder of their app, say.
    const a = nodeAt(p, 'a');
    const top = emu.tree.get(a.parentId ?? '');
    if (!top) throw new Error('setup');
    const trash = emu.tree.create(top, '.trash', 'folder');
    emu.tree.move(a, trash, 'a');
    // A save to a/b/new.txt makes a new a/b, it does not go into the moved folder.
    await p.write('a/b/new.txt', Buffer.from('new'));
    expect(emu.tree.resolve(`/${p.name.split('/').slice(1).join('/')}/.trash/a/b/new.txt`)).toBeUndefined();
    expect((await collect(await p.read('a/b/new.txt'))).toString()).toBe('new');
    // What moved is not at its old path any more: not stat-able, not writable, not removable there.
    await expect(p.stat('a/b/y.txt')).rejects.toBeInstanceOf(NotFoundError);
    await expect(p.write('a/b/x.txt', Buffer.from('x2'), { ifRevision: xRev })).rejects.toThrow();
    await expect(p.remove('a/b/y.txt')).rejects.toBeInstanceOf(NotFoundError);
    const moved = (rel: string): string | undefined => {
      const n = emu.tree.resolve(`/${p.name.split('/').slice(1).join('/')}/.trash/a/b/${rel}`);
      return n?.content.toString();
    };
    expect(moved('x.txt')).toBe('x1');
    expect(moved('y.txt')).toBe('y1');
  });

  it('remove sends to the trash (restorable), conditional or not; useTrash: false deletes', async () => {
    const p = fresh();
    await p.write('t/a.txt', Buffer.from('a'));
    await p.write('t/b.txt', Buffer.from('b'));
    await p.write('t/sub/c.txt', Buffer.from('c'));
    const a = nodeAt(p, 't/a.txt');
    const b = nodeAt(p, 't/b.txt');
    const c = nodeAt(p, 't/sub/c.txt');
    await p.remove('t/a.txt');
    expect(a.meta.trashed).toBe('true');
    expect(emu.tree.get(a.id)).toBe(a); // still there, in the trash
    await expect(p.stat('t/a.txt')).rejects.toBeInstanceOf(NotFoundError);
    // Under If-Match: a stale revision is refused and nothing is trashed.
    const bRev = (await p.stat('t/b.txt')).revision;
    editElsewhere(b, 'b2');
    await expect(p.remove('t/b.txt', { ifRevision: bRev })).rejects.toBeInstanceOf(PreconditionFailedError);
    expect(b.meta.trashed).toBeUndefined();
    await p.remove('t/b.txt', { ifRevision: (await p.stat('t/b.txt')).revision });
    expect(b.meta.trashed).toBe('true');
    // A folder goes to the trash with what is inside; the name is free again.
    await p.remove('t');
    expect(emu.tree.get(c.id)).toBe(c);
    const listed: string[] = [];
    for await (const e of p.list('', { recursive: true })) listed.push(e.path);
    expect(listed).toEqual([]);
    await p.write('t/sub/c.txt', Buffer.from('new c'));
    expect((await collect(await p.read('t/sub/c.txt'))).toString()).toBe('new c');
    // Without the trash, gone for good.
    const q = new GDriveProvider({
      token: emu.accessToken,
      root: `specific/${randomBytes(4).toString('hex')}`,
      rootUrl: emu.url,
      useTrash: false,
    });
    await q.write('x.txt', Buffer.from('x'));
    const x = nodeAt(q, 'x.txt');
    await q.remove('x.txt', { ifRevision: (await q.stat('x.txt')).revision });
    expect(emu.tree.get(x.id)).toBeUndefined();
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

  describe('conditional writes are atomic', () => {
    const KiB = 1024;
    // Uploads go through files.update (v3) or v2.files.update (v2): the edit lands just before
    // whichever the adapter sends, i.e. after every check it makes.
    const beforeUpload = (fn: () => void): (() => void) => {
      const off = ['files.update', 'v2.files.update'].map((e) => emu.beforeRequest(e, fn));
      return () => off.forEach((o) => o());
    };

    for (const kind of ['small', 'resumable'] as const) {
      it(`ifRevision (${kind}): an edit landing between the revision check and the upload is refused`, async () => {
        const p = fresh({ chunkSize: 256 * KiB });
        const body = (text: string): Buffer =>
          kind === 'small'
            ? Buffer.from(text)
            : Buffer.concat([Buffer.from(text), Buffer.alloc(600 * KiB, 1)]);
        const v1 = await p.write('race.bin', body('v1'));
        const node = nodeAt(p, 'race.bin');
        const off = beforeUpload(() => editElsewhere(node, 'web edit'));
        try {
          await expect(p.write('race.bin', body('mine'), { ifRevision: v1.revision })).rejects.toBeInstanceOf(
            PreconditionFailedError,
          );
        } finally {
          off();
        }
        expect(node.content.toString()).toBe('web edit');
        expect(emu.openSessions()).toBe(0);
        // The caller reads again and retries on the revision it now sees.
        const now = await p.stat('race.bin');
        await expect(p.write('race.bin', body('mine'), { ifRevision: v1.revision })).rejects.toBeInstanceOf(
          PreconditionFailedError,
        );
        const v3 = await p.write('race.bin', body('mine'), {
          ifRevision: now.revision,
          modifiedMs: 1_600_000_000_000,
        });
        expect(node.content.subarray(0, 4).toString()).toBe('mine');
        expect(v3).toMatchObject({
          revision: node.meta.headRevisionId,
          size: node.content.byteLength,
          modifiedMs: 1_600_000_000_000,
          hash: { algorithm: 'sha256', value: sha(node.content) },
        });
        expect(await p.stat('race.bin')).toEqual(v3);
      });
    }

    it('ifRevision (resumable): an edit landing while the chunks are sent is refused at the commit', async () => {
      const p = fresh({ chunkSize: 256 * KiB });
      const v1 = await p.write('big.bin', randomBytes(600 * KiB));
      const node = nodeAt(p, 'big.bin');
      // Before the first chunk: the session is already open (under If-Match).
      const off = emu.beforeRequest('files.upload.resumable', () => editElsewhere(node, 'web edit'));
      try {
        await expect(
          p.write('big.bin', randomBytes(600 * KiB), { ifRevision: v1.revision }),
        ).rejects.toBeInstanceOf(PreconditionFailedError);
      } finally {
        off();
      }
      expect(node.content.toString()).toBe('web edit');
      expect(emu.openSessions()).toBe(0);
    });

    it('conditional remove: an edit landing between the revision check and the delete is refused', async () => {
      const p = fresh();
      const v1 = await p.write('rm.txt', Buffer.from('v1'));
      const node = nodeAt(p, 'rm.txt');
      const off = ['files.delete', 'v2.files.delete', 'files.update', 'v2.files.update'].map((e) =>
        emu.beforeRequest(e, () => editElsewhere(node, 'web edit')),
      );
      try {
        await expect(p.remove('rm.txt', { ifRevision: v1.revision })).rejects.toBeInstanceOf(
          PreconditionFailedError,
        );
      } finally {
        off.forEach((o) => o());
      }
      expect(emu.tree.get(node.id)?.content.toString()).toBe('web edit');
      await p.remove('rm.txt', { ifRevision: (await p.stat('rm.txt')).revision });
      expect(emu.tree.get(node.id)?.meta.trashed).toBe('true');
    });

    /** Two clients of one folder, each with its own adapter (its own locks and cache). */
    const twoClients = async (): Promise<[GDriveProvider, GDriveProvider, TreeNode]> => {
      const root = `specific/${randomBytes(4).toString('hex')}`;
      const make = (): GDriveProvider =>
        new GDriveProvider({ token: emu.accessToken, root, rootUrl: emu.url });
      const a = make();
      const b = make();
      await a.mkdir('d');
      await b.mkdir('d');
      return [a, b, nodeAt(a, 'd')];
    };
    const namedInD = (d: TreeNode): string[] =>
      emu.tree
        .children(d.id)
        .filter((n) => n.name === 'new.txt')
        .map((n) => n.content.toString());

    it('ifNotExists: a create landing between the check and ours wins; ours is deleted, AlreadyExists', async () => {
      const [a, b, d] = await twoClients();
      let bWrite: Promise<Entry> | undefined;
      // a found nothing and sends its create: b's whole write happens first.
      const off = emu.beforeRequest('files.create', async () => {
        bWrite = b.write('d/new.txt', Buffer.from('from b'), { ifNotExists: true });
        await bWrite.catch(() => undefined);
      });
      try {
        await expect(
          a.write('d/new.txt', Buffer.from('from a'), { ifNotExists: true }),
        ).rejects.toBeInstanceOf(AlreadyExistsError);
      } finally {
        off();
      }
      expect((await bWrite)?.path).toBe('d/new.txt');
      expect(namedInD(d)).toEqual(['from b']);
      expect((await collect(await a.read('d/new.txt'))).toString()).toBe('from b');
    });

    it('ifNotExists: both clients pass the check and both create: exactly one wins, nothing is left hidden', async () => {
      const [a, b, d] = await twoClients();
      let bWrite: Promise<Entry> | undefined;
      const bAtCreate = deferred();
      const aCreated = deferred();
      // a has checked and sends its create; b checks too (nothing there yet) and reaches its create.
      const off = emu.beforeRequest('files.create', async () => {
        emu.beforeRequest('files.create', async () => {
          bAtCreate.resolve();
          await aCreated.promise;
        });
        bWrite = b.write('d/new.txt', Buffer.from('from b'), { ifNotExists: true });
        await bAtCreate.promise;
        // a's create is made; before a lists the name, b's create lands and b settles.
        emu.beforeRequest('files.list', async () => {
          aCreated.resolve(); // a's item is the older
          await bWrite?.catch(() => undefined);
        });
      });
      try {
        const won = await a.write('d/new.txt', Buffer.from('from a'), { ifNotExists: true });
        expect(won.path).toBe('d/new.txt');
      } finally {
        off();
      }
      // b listed the name after both creates: a's item is the older, so b deleted its own.
      await expect(bWrite).rejects.toBeInstanceOf(AlreadyExistsError);
      expect(namedInD(d)).toEqual(['from a']);
      expect((await collect(await b.read('d/new.txt'))).toString()).toBe('from a');
    });

    it('folders: a younger folder of ours someone wrote into before we settled is merged, nothing hidden', async () => {
      const [a, b, d] = await twoClients();
      // a found no folder x and sends its create; b makes x first (the older one). Before a
      // settles, a third client writes into a's (younger) x by its id.
      const off = emu.beforeRequest('files.create', async () => {
        await b.write('d/x/b.txt', Buffer.from('from b'));
        emu.beforeRequest('files.list', () => {
          const xs = emu.tree.children(d.id).filter((n) => n.name === 'x');
          const younger = xs.sort((p, q) => q.createdMs - p.createdMs)[0] as TreeNode;
          emu.tree.create(younger, 'c.txt', 'file', Buffer.from('from c'));
        });
      });
      try {
        await a.write('d/x/a.txt', Buffer.from('from a'));
      } finally {
        off();
      }
      const xs = emu.tree.children(d.id).filter((n) => n.name === 'x');
      expect(xs).toHaveLength(1);
      const x = xs[0] as TreeNode;
      expect(
        emu.tree
          .children(x.id)
          .map((n) => `${n.name}:${n.content.toString()}`)
          .sort(),
      ).toEqual(['a.txt:from a', 'b.txt:from b', 'c.txt:from c']);
    });

    it('folders: two clients creating one folder at once end with one folder holding both files', async () => {
      const [a, b, d] = await twoClients();
      // a found no folder x and sends its create: b makes x and writes into it first.
      const off = emu.beforeRequest('files.create', async () => {
        await b.write('d/x/b.txt', Buffer.from('from b'));
      });
      try {
        await a.write('d/x/a.txt', Buffer.from('from a'));
      } finally {
        off();
      }
      const xs = emu.tree.children(d.id).filter((n) => n.name === 'x');
      expect(xs).toHaveLength(1);
      const x = xs[0] as TreeNode;
      expect(
        emu.tree
          .children(x.id)
          .map((n) => `${n.name}:${n.content.toString()}`)
          .sort(),
      ).toEqual(['a.txt:from a', 'b.txt:from b']);
      const listed: string[] = [];
      for await (const e of b.list('d', { recursive: true })) listed.push(e.path);
      expect(listed.sort()).toEqual(['d/x', 'd/x/a.txt', 'd/x/b.txt']);
    });
  });
  it('feed: a file changed inside a folder, then the folder moved — resolved under its new path', async () => {
    const root = `specific/${randomBytes(4).toString('hex')}`;
    const make = (): GDriveProvider => new GDriveProvider({ token: emu.accessToken, root, rootUrl: emu.url });
    const person = make();
    const mirror = make();
    await mirror.write('notes/old/f1.txt', Buffer.from('a'));
    await mirror.write('notes/old/f2.txt', Buffer.from('b'));
    let cursor = await mirror.latestCursor();
    // The file changes first, its folder moves after: the feed lists the file first.
    await person.move('notes/old/f1.txt', 'notes/old/r1.txt');
    await person.move('notes/old', 'moved');
    const out: string[] = [];
    for (;;) {
      const page = await mirror.changes(cursor);
      out.push(...page.changes.map((c) => `${c.type}:${c.path}`));
      cursor = page.cursor;
      if (!page.hasMore) break;
    }
    // Nothing is reported as being at a path it no longer has (deletes of old paths are fine).
    expect(out.filter((c) => c.startsWith('upsert:notes/old'))).toEqual([]);
    expect(out).toContain('delete:notes/old');
    expect(out).toContain('upsert:moved/r1.txt');
    expect(out).toContain('upsert:moved/f2.txt');
  });
});
