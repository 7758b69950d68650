/**
 * Directed engine scenarios on the harness, each a function that throws when the engine
 * does not do what the decision table (docs/sync-decisions.md) and the rest of the design
 * say. They run as tests (fake-cloud-scenarios.test.ts) and under every decision-row
 * mutation (fake-cloud-mutations.test.ts). Most moved here from e2e/ (see each one).
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { expect } from 'vitest';
import { Journal } from '../../src/journal/journal.ts';
import { OfflineError } from '../../src/remote/proxy-client.ts';
import { onCloud, pair, sameTrees as converged } from './cloud-run.ts';
import { type FakeCloud, type FakeDevice, localTree, sha256, sorted } from './fake-cloud.ts';

type Scenario = () => Promise<void>;

/** Run `body` on a fresh cloud, closed afterwards whatever happens. */
const withCloud =
  (body: (cloud: FakeCloud) => Promise<void>, small?: number): Scenario =>
  () =>
    onCloud(body, small);

const copies = (tree: Map<string, string>): string[] =>
  [...tree.keys()].filter((p) => p.includes('conflicted copy'));

export const SCENARIOS: Record<string, Scenario> = {
  /** D3, D8, D16: a file made there comes down, an edit there comes down, our echo is nothing. */
  'created and edited there': withCloud(async (cloud) => {
    const [a, b] = await pair(cloud);
    await a.write('n.txt', 'v1');
    await a.sync();
    await b.sync();
    expect(await b.read('n.txt')).toBe('v1');
    await a.write('n.txt', 'v2');
    await a.sync();
    await a.sync(); // our own write comes back through the feed: nothing to do
    await b.sync();
    expect(await b.read('n.txt')).toBe('v2');
    expect(copies(await a.tree())).toEqual([]);
    await converged(cloud);
  }),

  /** D4, D9: the same content on both sides is recorded, never a conflict. */
  'same content on both sides': withCloud(async (cloud) => {
    const [a, b] = await pair(cloud);
    await a.write('same.txt', 'identical');
    await b.write('same.txt', 'identical');
    await a.sync();
    await b.sync();
    await a.write('same.txt', 'identical edit');
    await b.write('same.txt', 'identical edit');
    await a.sync();
    await b.sync();
    await converged(cloud);
    expect(copies(cloud.serverTree())).toEqual([]);
  }),

  /** D5, D10, D23: different contents on both sides: both kept, one as a conflicted copy. */
  'conflicts keep both': withCloud(async (cloud) => {
    const [a, b] = await pair(cloud);
    await a.write('new.txt', 'from laptop');
    await b.write('new.txt', 'from desktop');
    await a.write('doc.txt', 'base');
    await a.sync();
    await b.sync();
    await a.write('doc.txt', 'laptop edit');
    await b.write('doc.txt', 'desktop edit');
    await a.sync();
    await b.sync();
    await converged(cloud);
    const contents = new Set(cloud.serverTree().values());
    for (const c of ['from laptop', 'from desktop', 'laptop edit', 'desktop edit'])
      expect(contents).toContain(sha256(c));
    expect(copies(cloud.serverTree())).toHaveLength(2);
  }),

  /** D23: theirs reaches the server between our pull and our push: the server keeps ours as a copy. */
  'server keeps our late write as a copy': withCloud(async (cloud) => {
    const [a, b] = await pair(cloud);
    await a.write('x.txt', 'base');
    await a.sync();
    await b.sync();
    await a.write('x.txt', 'laptop');
    await b.write('x.txt', 'desktop');
    b.remote.beforeCall = async (method) => {
      if (method !== 'uploadBundle') return;
      b.remote.beforeCall = undefined;
      await a.sync();
    };
    await b.sync();
    await converged(cloud);
    expect(cloud.server.read('alice', 'x.txt')).toEqual(new TextEncoder().encode('laptop'));
    const copy = copies(cloud.serverTree());
    expect(copy).toHaveLength(1);
    expect(cloud.serverTree().get(copy[0] ?? '')).toBe(sha256('desktop'));
    expect(await b.read('x.txt')).toBe('laptop');
  }),

  /** D11, D12, D13: deletes travel both ways; a delete on both sides is forgotten. */
  'deletes travel': withCloud(async (cloud) => {
    const [a, b] = await pair(cloud);
    for (const p of ['one.txt', 'two.txt', 'both.txt']) await a.write(p, p);
    await a.sync();
    await b.sync();
    await a.rm('one.txt');
    await b.rm('two.txt');
    await a.rm('both.txt');
    await b.rm('both.txt');
    await a.sync();
    await b.sync();
    // D13: deleted on both sides — forgotten here, no delete of ours sent after theirs.
    expect(b.remote.sentOps.filter((o) => o.op === 'delete' && o.path === 'both.txt')).toEqual([]);
    await converged(cloud);
    expect([...cloud.serverTree().keys()]).toEqual([]);
  }),

  /**
   * D6: edited there and back again before we pulled: the revision moved, the content is
   * our base — in sync, nothing kept twice, nothing sent.
   */
  'edited there and back': withCloud(async (cloud) => {
    const [a, b] = await pair(cloud);
    await a.write('r.txt', 'first');
    await a.sync();
    await b.sync();
    await a.write('r.txt', 'second');
    await a.sync();
    await a.write('r.txt', 'first');
    await a.sync();
    await b.sync();
    expect(await b.read('r.txt')).toBe('first');
    expect(copies(await b.tree())).toEqual([]);
    expect(b.remote.sentOps).toEqual([]);
    await converged(cloud);
    expect(copies(cloud.serverTree())).toEqual([]);
  }),

  /** D14, D15, D19: an edit outranks a delete, on either side, also inside a deleted folder. */
  'edits outrank deletes': withCloud(async (cloud) => {
    const [a, b] = await pair(cloud);
    await a.write('e1.txt', 'v1');
    await a.write('e2.txt', 'v1');
    await a.write('dir/kept.txt', 'v1');
    await a.write('dir/gone.txt', 'v1');
    await a.sync();
    await b.sync();
    await a.write('e1.txt', 'edited on laptop');
    await b.rm('e1.txt');
    await a.rm('e2.txt');
    await b.write('e2.txt', 'edited on desktop');
    await a.rm('dir');
    await b.write('dir/kept.txt', 'edited in a deleted folder');
    await a.sync();
    await b.sync();
    // D14: their edit came down before our delete went up: the delete was never sent.
    expect(b.remote.sentOps.filter((o) => o.op === 'delete' && o.path === 'e1.txt')).toEqual([]);
    await converged(cloud);
    const t = cloud.serverTree();
    expect(t.get('e1.txt')).toBe(sha256('edited on laptop'));
    expect(t.get('e2.txt')).toBe(sha256('edited on desktop'));
    expect(t.get('dir/kept.txt')).toBe(sha256('edited in a deleted folder'));
    expect(t.has('dir/gone.txt')).toBe(false);
  }),

  /** D20, D21: a move there is the same rename here; a move whose source we lack comes down. */
  moves: withCloud(async (cloud) => {
    const [a, b] = await pair(cloud);
    await a.write('from.txt', 'moving');
    await a.write('folder/in.txt', 'inside');
    await a.sync();
    await b.sync();
    await a.mv('from.txt', 'to.txt');
    await a.mv('folder', 'renamed');
    await a.sync();
    const downloadsBefore =
      (b.remote.calls.get('downloadBundle') ?? 0) + (b.remote.calls.get('download') ?? 0);
    await b.sync();
    expect(await b.read('to.txt')).toBe('moving');
    expect(await b.read('renamed/in.txt')).toBe('inside');
    // The same rename here: nothing came down.
    expect((b.remote.calls.get('downloadBundle') ?? 0) + (b.remote.calls.get('download') ?? 0)).toBe(
      downloadsBefore,
    );
    const c = await cloud.addDevice('phone');
    await a.mv('to.txt', 'again.txt');
    await a.sync();
    await c.sync(); // never had the source: the destination comes down
    expect(await c.read('again.txt')).toBe('moving');
    await converged(cloud);
  }),

  /** D22: a file there became a folder (and back): the old kind goes, the new comes down. */
  'kind changes': withCloud(async (cloud) => {
    const [a, b] = await pair(cloud);
    await a.write('thing', 'a file');
    await a.write('other/x.txt', 'x');
    await a.sync();
    await b.sync();
    await a.rm('thing');
    await a.write('thing/inside.txt', 'now a folder');
    await a.rm('other');
    await a.write('other', 'now a file');
    await a.sync();
    await b.sync();
    expect(await b.read('thing/inside.txt')).toBe('now a folder');
    expect(await b.read('other')).toBe('now a file');
    await converged(cloud);
  }),

  /**
   * Our move reaches the server after another device's edit of the file (between our pull
   * and our push): the server moves their newer content; our edit of the moved file must
   * not overwrite it unseen — both are kept. (Seeds 11, 76, 112 and 142 of the random
   * schedules lose such an edit on a longer path; this direct one holds.)
   */
  'a move carries newer content': withCloud(async (cloud) => {
    const [a, b] = await pair(cloud);
    await a.write('f.txt', 'v1');
    await a.sync();
    await b.sync();
    await a.write('f.txt', 'v2 from laptop');
    await b.mv('f.txt', 'g.txt');
    await b.write('g.txt', 'v3 from desktop');
    b.remote.beforeCall = async (method) => {
      if (method !== 'ops') return;
      b.remote.beforeCall = undefined;
      await a.sync();
    };
    await b.sync();
    await converged(cloud);
    const contents = [...cloud.serverTree().values()];
    expect(contents).toContain(sha256('v2 from laptop'));
    expect(contents).toContain(sha256('v3 from desktop'));
  }),

  /** D25: what we moved (queued while offline) is gone there, deleted by the other device: it goes up again. */
  'move of something deleted there': withCloud(async (cloud) => {
    const [a, b] = await pair(cloud);
    await a.write('doomed.txt', 'keep me');
    await a.sync();
    await b.sync();
    a.offline = true;
    await a.mv('doomed.txt', 'saved.txt');
    await a.sync();
    await b.rm('doomed.txt');
    await b.sync();
    a.offline = false;
    await a.sync();
    await converged(cloud);
    expect(cloud.serverTree().get('saved.txt')).toBe(sha256('keep me'));
  }),

  /**
   * D17: our upload reached the server but its answer was lost; we edit again before the
   * next sync: the sent version is the new base (no conflict with ourselves), ours goes up.
   */
  'lost acknowledgement': withCloud(async (cloud) => {
    const [a] = await pair(cloud);
    await a.write('ack.txt', 'v1');
    await a.sync();
    await a.write('ack.txt', 'v2');
    a.remote.failNext('uploadBundle', new OfflineError('connection reset after the write'), 0, true);
    await a.sync();
    expect(cloud.serverTree().get('ack.txt')).toBe(sha256('v2'));
    await a.write('ack.txt', 'v3');
    await a.sync();
    await a.sync();
    await converged(cloud);
    expect(copies(cloud.serverTree())).toEqual([]);
    expect(cloud.serverTree().get('ack.txt')).toBe(sha256('v3'));
  }),

  /**
   * D18, from e2e/test/case-clash.test.ts: two Linux devices hold Notes.md and NOTES.md; a
   * device whose disk folds case keeps one, loses neither, and says so.
   */
  'names that differ only by case': withCloud(async (cloud) => {
    const [a, b] = await pair(cloud);
    await a.write('Notes.md', 'first');
    await a.sync();
    await b.sync();
    await b.write('NOTES.md', 'second');
    await b.sync();
    expect([...cloud.serverTree().keys()].sort()).toEqual(['NOTES.md', 'Notes.md']);
    const mac = await cloud.addDevice('mac', { caseInsensitive: true });
    await mac.sync();
    const names = (await fsp.readdir(mac.folder)).filter((n) => !n.startsWith('.weft'));
    expect(names).toHaveLength(1);
    const kept = names[0] ?? '';
    expect(await mac.read(kept)).toBe(kept === 'Notes.md' ? 'first' : 'second');
    expect(mac.engine.getStatus().warnings.some((w) => w.includes('differs only by case'))).toBe(true);
    await mac.sync();
    expect([...cloud.serverTree().keys()].sort()).toEqual(['NOTES.md', 'Notes.md']);
  }),

  /**
   * From e2e/test/offline.test.ts: edits made offline queue up and coalesce (20 edits of one
   * file are one upload, a file made and deleted is nothing) and go up when back online.
   */
  'offline edits coalesce and flush': withCloud(async (cloud) => {
    const a = await cloud.addDevice('laptop');
    await a.write('keep.txt', 'v0');
    await a.sync();
    a.offline = true;
    for (let i = 1; i <= 20; i++) {
      await a.write('keep.txt', `v${i}`);
      await a.sync();
    }
    await a.write('temp.txt', 'short-lived');
    await a.sync();
    await a.rm('temp.txt');
    await a.write('draft/note.md', 'hello');
    await a.sync();
    expect(a.engine.getStatus().state).toBe('offline');
    const queued = a.engine.journal.pendingOps().map((q) => q.op);
    expect(queued.filter((o) => o.kind === 'put' && o.path === 'keep.txt')).toHaveLength(1);
    expect(queued.some((o) => 'path' in o && o.path === 'temp.txt')).toBe(false);
    expect(a.engine.getStatus().savings.operationsEliminated).toBeGreaterThanOrEqual(19);
    a.offline = false;
    await a.sync();
    expect(a.engine.journal.pendingOps()).toEqual([]);
    expect(sorted(cloud.serverTree())).toEqual(sorted(await a.tree()));
  }),

  /** The mass-delete guard: a pass that would delete most files pauses; restore brings them back. */
  'mass delete is held': withCloud(async (cloud) => {
    const a = await cloud.addDevice('laptop', { massDeleteCount: 10 });
    for (let i = 0; i < 30; i++) await a.write(`many/f${i}.txt`, `file ${i}`);
    await a.sync();
    for (let i = 0; i < 25; i++) await a.rm(`many/f${i}.txt`);
    await a.sync();
    expect(a.engine.getStatus().state).toBe('paused');
    expect(cloud.serverTree().has('many/f0.txt')).toBe(true);
    await a.engine.resolveMassDelete('restore');
    await a.sync();
    expect(await a.read('many/f0.txt')).toBe('file 0');
    expect(cloud.serverTree().has('many/f0.txt')).toBe(true);
    for (let i = 0; i < 25; i++) await a.rm(`many/f${i}.txt`);
    await a.sync();
    await a.engine.resolveMassDelete('delete');
    await a.sync();
    expect([...cloud.serverTree().keys()].filter((p) => p.startsWith('many/f')).length).toBe(5);
  }),

  /**
   * From e2e/test/consistency.test.ts: after a crash the feed events missed while down are
   * found by the Merkle check, top-down, and repaired (a file that became a folder: D22); an
   * edit made here meanwhile is kept.
   */
  'consistency repair after a crash': withCloud(async (cloud) => {
    const [a, b] = await pair(cloud);
    for (const p of ['x.txt', 'keep.txt', 'dir/y.txt', 'dir/sub/z.txt', 'dir/sub/w.txt', 'other/o.txt'])
      await a.write(p, `first ${p}`);
    await a.sync();
    await b.sync();
    await loseFeedWhileDown(cloud, b, true, async () => {
      await a.write('x.txt', 'second x');
      await a.rm('dir/sub/z.txt');
      await a.write('dir/sub/new.txt', 'new deep file');
      await a.write('top/new2.txt', 'new folder');
      await a.write('notes.txt', 'server side');
      await a.rm('keep.txt');
      await a.write('keep.txt/inner.txt', 'a file became a folder');
      await a.sync();
    });
    await b.write('notes.txt', 'made here meanwhile');
    await b.sync();
    const check = b.engine.lastCheck;
    expect(check?.paths).toEqual([
      'dir/sub/new.txt',
      'dir/sub/z.txt',
      'keep.txt',
      'notes.txt',
      'top',
      'x.txt',
    ]);
    expect(check?.roundTrips).toBe(3);
    await converged(cloud);
    const contents = new Set(cloud.serverTree().values());
    expect(contents).toContain(sha256('made here meanwhile'));
    expect(contents).toContain(sha256('server side'));
  }),

  /** From e2e/test/consistency.test.ts: no check after a clean stop; asked for, it repairs. */
  'consistency check on request': withCloud(async (cloud) => {
    const [a, b] = await pair(cloud);
    await a.write('notes.txt', 'v1');
    await a.sync();
    await b.sync();
    await loseFeedWhileDown(cloud, b, false, async () => {
      await a.write('notes.txt', 'v2 from laptop');
      await a.sync();
    });
    await b.sync();
    expect(b.engine.lastCheck).toBeUndefined();
    expect(await b.read('notes.txt')).toBe('v1');
    await b.write('notes.txt', 'v2 from desktop');
    const found = await b.engine.checkConsistency();
    expect(found.paths).toEqual(['notes.txt']);
    await converged(cloud);
    const contents = [...(await localTree(b.folder)).values()].sort();
    expect(contents).toEqual([sha256('v2 from desktop'), sha256('v2 from laptop')].sort());
  }),

  /**
   * D26: the server refuses one of our operations for a reason of its own (here a rename,
   * with INTERNAL): the next pull lists the whole folder and compares, so the two sides do
   * not drift apart — the file is where the server has it, its content kept.
   */
  'any other refusal compares the whole folder': withCloud(async (cloud) => {
    const [a, b] = await pair(cloud);
    await a.write('x.txt', 'kept');
    await a.sync();
    await b.sync();
    await a.mv('x.txt', 'y.txt');
    a.remote.refuseNextOp((op) => op.op === 'move', 'INTERNAL');
    const listsBefore = a.remote.calls.get('list') ?? 0;
    await a.sync();
    expect(a.remote.calls.get('list') ?? 0).toBeGreaterThan(listsBefore);
    await converged(cloud);
    expect(cloud.serverTree().get('x.txt')).toBe(sha256('kept'));
  }),

  /**
   * D24: a rename queued offline onto a name another device then filled: ours moves on to
   * a conflicted copy, theirs keeps the name. (Was an expected failure: the pull took theirs
   * for an edit of our moved file, D8, and D24 then renamed theirs to the copy; the pull now
   * holds changes at a queued move's ends until the push — sync/discovery/held.ts.)
   */
  'move onto a taken name': withCloud(async (cloud) => {
    const [a, b] = await pair(cloud);
    await a.write('mine.txt', 'mine');
    await a.sync();
    await b.sync();
    a.offline = true;
    await a.mv('mine.txt', 'target.txt');
    await a.sync();
    await b.write('target.txt', 'theirs');
    await b.sync();
    a.offline = false;
    await a.sync();
    await converged(cloud);
    const t = cloud.serverTree();
    expect(t.get('target.txt')).toBe(sha256('theirs'));
    expect(copies(t).map((p) => t.get(p))).toEqual([sha256('mine')]);
    expect(t.has('mine.txt')).toBe(false);
  }),
  /**
   * D27: a folder made here offline while another device made a file of that name: both
   * kept, ours as a conflicted copy (was an expected failure: the pull decided the file D3
   * and its download moved our folder to the trash, EISDIR, in every pass).
   */
  'a folder made here, a file of that name there': withCloud(async (cloud) => {
    const [a, b] = await pair(cloud);
    a.offline = true;
    await a.mkdir('x');
    await a.write('x/inside.txt', 'in our folder');
    await a.sync();
    await b.write('x', 'a file');
    await b.sync();
    a.offline = false;
    await a.sync();
    expect(a.engine.error).toBeUndefined();
    await converged(cloud);
    const t = cloud.serverTree();
    expect(t.get('x')).toBe(sha256('a file'));
    const copy = copies(t).find((p) => t.get(p) === 'dir');
    expect(copy).toBeDefined();
    expect(t.get(`${copy}/inside.txt`)).toBe(sha256('in our folder'));
  }),
  /** D27, the other way: a file made here offline, a folder of that name there. */
  'a file made here, a folder of that name there': withCloud(async (cloud) => {
    const [a, b] = await pair(cloud);
    a.offline = true;
    await a.write('x', 'a file here');
    await a.sync();
    await b.write('x/in.txt', 'in their folder');
    await b.sync();
    a.offline = false;
    await a.sync();
    expect(a.engine.error).toBeUndefined();
    await converged(cloud);
    const t = cloud.serverTree();
    expect(t.get('x/in.txt')).toBe(sha256('in their folder'));
    expect(copies(t).map((p) => t.get(p))).toEqual([sha256('a file here')]);
  }),
};

/**
 * Scenarios that fail today because of an engine bug the harness found (issue #15 report);
 * they run as expected failures (`it.fails`), so a fix shows up as a failing test to move
 * them into SCENARIOS.
 */
export const KNOWN_BUG_SCENARIOS: Record<string, { bug: string; scenario: Scenario }> = {};

/** `d` misses every change made while it is down: its journal's cursor jumps past them. */
async function loseFeedWhileDown(
  cloud: FakeCloud,
  d: FakeDevice,
  crashed: boolean,
  changes: () => Promise<void>,
): Promise<void> {
  await d.restart({}, async () => {
    await changes();
    const j = new Journal(nodePath.join(d.stateDir, 'journal.db'));
    j.setMeta('cursor', String(cloud.seq));
    if (crashed) j.setMeta('running', '1'); // as a kill -9 leaves it
    j.close();
  });
}
