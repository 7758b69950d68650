/**
 * Engine bugs the random schedules (fake-cloud-random.test.ts) found, each as a small
 * scripted scenario on the harness that failed before its fix (issue #15; the seeds are
 * named with each). A bug still open is in support/known-failures.ts instead.
 */
import * as nodePath from 'node:path';
import { describe, expect, it } from 'vitest';
import { Journal } from '../src/journal/journal.ts';
import { converged, onCloud as withCloud, pair } from './support/cloud-run.ts';
import { sha256, sorted } from './support/fake-cloud.ts';

describe('engine bugs found by the random schedules', () => {
  /**
   * duplicatePutsInQueue (seeds 8, 133, 147, 189): a folder made offline (mkdir + puts
   * queued) that another device made and deleted meanwhile: the remote delete keeps our
   * new files (D19) and queues the folder's mkdir again; the scan then queues each put
   * again, behind that mkdir — two puts of one path in one bundle, which the encoder
   * refuses ("appears twice"), and the device never synced again.
   */
  it('a folder made offline and deleted there meanwhile goes up once (no duplicate puts)', () =>
    withCloud(async (cloud) => {
      const [a, b] = await pair(cloud);
      a.offline = true;
      await a.write('D/a.txt', 'new here');
      await a.write('D/b.txt', 'also new');
      await a.sync();
      await b.mkdir('D');
      await b.sync();
      await b.rm('D');
      await b.sync();
      a.offline = false;
      await a.sync();
      await converged(cloud);
      expect(cloud.serverTree().get('D/a.txt')).toBe(sha256('new here'));
      expect(cloud.serverTree().get('D/b.txt')).toBe(sha256('also new'));
    }));

  /** duplicatePutsInQueue, for a journal that already holds the two puts (written before the fix). */
  it('a journal holding two puts of one path in one window syncs again', () =>
    withCloud(async (cloud) => {
      const [a] = await pair(cloud);
      await a.write('x.txt', 'v1');
      await a.sync();
      a.offline = true;
      await a.write('x.txt', 'v2');
      await a.sync();
      await a.restart({}, async () => {
        const j = new Journal(nodePath.join(a.stateDir, 'journal.db'));
        j.db.exec(
          `INSERT INTO ops(kind, path, to_path, hash, size, created, replaces, queued_at)
           SELECT kind, path, to_path, hash, size, created, replaces, queued_at FROM ops WHERE path = 'x.txt'`,
        );
        expect(j.pendingOps().filter((q) => q.op.kind === 'put' && q.op.path === 'x.txt')).toHaveLength(2);
        j.close();
      });
      a.offline = false;
      await a.sync();
      await converged(cloud);
      expect(cloud.serverTree().get('x.txt')).toBe(sha256('v2'));
    }));

  /**
   * moveCarriesNewerContent (seeds 11, 76, 112, 142): a rename and an edit made offline;
   * meanwhile another device edited the file. The server moves their newer content; the
   * move's answer must not make that content our base, or our edit goes up over theirs
   * unseen. Both are kept instead (one as a conflicted copy).
   */
  it('a move made offline does not take another device’s newer edit as its base', () =>
    withCloud(async (cloud) => {
      const [a, b] = await pair(cloud);
      await a.write('b.txt', 'v1');
      await a.sync();
      await b.sync();
      await b.write('b.txt', 'v2'); // its echo is still in the feed when b moves the file
      await b.sync();
      await a.sync();
      b.offline = true;
      await b.mv('b.txt', 'd/b.moved');
      await b.sync(); // the scan sees a move
      await b.write('d/b.moved', 'edited after the move');
      await b.sync();
      await a.write('b.txt', 'edited there meanwhile');
      await a.sync();
      b.offline = false;
      await b.sync();
      await converged(cloud);
      const contents = [...cloud.serverTree().values()];
      expect(contents).toContain(sha256('edited after the move'));
      expect(contents).toContain(sha256('edited there meanwhile'));
    }));

  /**
   * moveCarriesNewerContent, the other way (seeds 11, 112, 142): an edit made here offline
   * (its put queued) of a file another device renamed meanwhile. The rename is done here
   * too (D20) and takes the edited file along; the queued put named the old path, and the
   * edit never went up: the device kept it, the server and the others the old content.
   */
  it('an edit queued here follows a rename made there (D20) and goes up under the new name', () =>
    withCloud(async (cloud) => {
      const [a, b] = await pair(cloud);
      await a.write('A.txt', 'v1');
      await a.sync();
      await b.sync();
      a.offline = true;
      await a.write('A.txt', 'edited here offline');
      await a.sync();
      await b.mv('A.txt', 'd/c.moved');
      await b.sync();
      a.offline = false;
      await a.sync();
      await converged(cloud);
      expect(cloud.serverTree().get('d/c.moved')).toBe(sha256('edited here offline'));
      expect(cloud.serverTree().has('A.txt')).toBe(false);
    }));

  /**
   * moveCarriesNewerContent, a third way (seed 11 once the above were fixed): an edit there
   * and then a rename there, pulled together. The edit's download finds the old name gone
   * on the server; the rename is then done here (D20) and must not take the edited
   * revision as the base of the old content we still hold — the edit comes down.
   */
  it('an edit there followed by a rename there, pulled together, comes down', () =>
    withCloud(async (cloud) => {
      const [a, b] = await pair(cloud);
      await a.write('f.txt', 'v1');
      await a.sync();
      await b.sync();
      await a.write('f.txt', 'v2 edited there');
      await a.sync();
      await a.mv('f.txt', 'g.txt');
      await a.sync();
      await b.sync();
      expect(await b.read('g.txt')).toBe('v2 edited there');
      await converged(cloud);
    }));

  /**
   * missedRemoteFiles (seeds 82, 123): a file put into a folder there and the folder then
   * renamed there, pulled together. The file's download finds the old name gone; the rename
   * is done here (D20) on a folder without it, and the feed is past both: the file never
   * came down. After a folder rename the engine now compares the folder with the server.
   */
  it('a file put into a folder there that was then renamed there comes down', () =>
    withCloud(async (cloud) => {
      const [a, b] = await pair(cloud);
      await a.write('D/old.txt', 'known to both');
      await a.sync();
      await b.sync();
      await a.write('D/new.txt', 'put there');
      await a.sync();
      await a.mv('D', 'e');
      await a.sync();
      await b.sync();
      expect(await b.read('e/new.txt')).toBe('put there');
      await converged(cloud);
    }));

  /**
   * folderMoveToCopy (seeds 136, 137, 197): a folder renamed offline, with a new file put
   * in it, onto a name another device took meanwhile. The server refuses the rename; ours
   * moves on to a conflicted-copy name (D24) — and the new file's queued put, which named
   * the refused destination, must follow it there, or the file stays on this device only.
   */
  it('a folder renamed onto a name taken meanwhile keeps its new files in the copy (D24)', () =>
    withCloud(async (cloud) => {
      const [a, b] = await pair(cloud);
      await a.mkdir('d');
      await a.write('d/old.txt', 'known to both');
      await a.sync();
      await b.sync();
      a.offline = true;
      await a.write('d/b.txt', 'new in the renamed folder');
      await a.mv('d', 'e');
      await a.sync();
      await b.mkdir('e');
      await b.sync();
      a.offline = false;
      await a.sync();
      await converged(cloud);
      const t = cloud.serverTree();
      const copy = [...t.keys()].find((p) => p.startsWith('e (conflicted copy'));
      expect(copy).toBeDefined();
      expect(t.get(`${copy}/b.txt`)).toBe(sha256('new in the renamed folder'));
      expect(t.get(`${copy}/old.txt`)).toBe(sha256('known to both'));
    }));

  /**
   * folderMoveToCopy (seed 2): the same, where the pull first merged their folder into our
   * renamed one (their files came down into it). The refused rename moves ours on to the
   * copy name; their files must not go with it — they stay theirs, under the taken name.
   */
  it('a folder renamed onto a name taken meanwhile gives back what came down into it (D24)', () =>
    withCloud(async (cloud) => {
      const [a, b] = await pair(cloud);
      await a.write('e/ours.txt', 'ours');
      await a.sync();
      await b.sync();
      await a.sync();
      a.offline = true;
      await a.mv('e', 'D');
      await a.sync();
      await b.write('D/theirs.txt', 'theirs');
      await b.sync();
      a.offline = false;
      await a.sync();
      await converged(cloud);
      const t = cloud.serverTree();
      const copy = [...t.keys()].find((p) => p.startsWith('D (conflicted copy'));
      expect(copy).toBeDefined();
      expect(sorted(t).filter(([p]) => p.startsWith('D/') || p.startsWith(`${copy}/`))).toEqual([
        [`${copy}/ours.txt`, sha256('ours')],
        ['D/theirs.txt', sha256('theirs')],
      ]);
    }));

  /** The same comparison, when the renamed folder was deleted there too: nothing to fetch, no error (seed 518). */
  it('a folder renamed there and then deleted there, pulled together, is simply gone', () =>
    withCloud(async (cloud) => {
      const [a, b] = await pair(cloud);
      await a.write('D/x.txt', 'x');
      await a.sync();
      await b.sync();
      await a.mv('D', 'e');
      await a.sync();
      await a.rm('e');
      await a.sync();
      await b.sync();
      expect(b.engine.error).toBeUndefined();
      expect(await b.exists('e')).toBe(false);
      await converged(cloud);
    }));

  /**
   * lostAfterConverging (seed 173): a folder deleted here offline while another device put
   * new files into it. The pull brings them down first (nothing lost: D3); the queued folder
   * delete must then not take them from the server — only what this device knew goes.
   */
  it('a folder delete queued offline spares the files put into it there meanwhile', () =>
    withCloud(async (cloud) => {
      const [a, b] = await pair(cloud);
      await a.write('D/old.txt', 'known to both');
      await a.write('D/sub/old.txt', 'known to both, deeper');
      await a.sync();
      await b.sync();
      await a.sync(); // its own uploads come back through the feed
      a.offline = true;
      await a.rm('D');
      await a.sync();
      await b.write('D/new.txt', 'put there meanwhile');
      await b.write('D/sub/new.txt', 'put there meanwhile, deeper');
      await b.sync();
      a.offline = false;
      await a.sync();
      await converged(cloud);
      const t = cloud.serverTree();
      expect(t.get('D/new.txt')).toBe(sha256('put there meanwhile'));
      expect(t.get('D/sub/new.txt')).toBe(sha256('put there meanwhile, deeper'));
      expect(t.has('D/old.txt')).toBe(false);
      expect(t.has('D/sub/old.txt')).toBe(false);
    }));
  /**
   * putBehindFolderMove (seeds 908, 1027, 1211, 1795): offline, a folder made with a file in
   * it, then the folder renamed. The queue sends mkdir D, put D/f, move D→e in that order,
   * but the put read D/f from disk, found it gone (it is at e/f now), and dropped itself as
   * a vanished file; the journal already knew e/f, so no scan queued it again: the file
   * stayed on this device only. The put now reads the file where the later queued moves
   * carried it.
   */
  it('a file put into a folder made offline and then renamed offline goes up', () =>
    withCloud(async (cloud) => {
      const [a, b] = await pair(cloud);
      a.offline = true;
      await a.write('D/f.txt', 'made offline');
      await a.sync();
      await a.mv('D', 'e');
      await a.sync();
      a.offline = false;
      await a.sync();
      await b.sync();
      expect(cloud.serverTree().get('e/f.txt')).toBe(sha256('made offline'));
      expect(await b.read('e/f.txt')).toBe('made offline');
      await converged(cloud);
    }));
  /**
   * deltaAheadOfFeed (seeds 1437, 1453): a large edit there, then the file renamed there and
   * a new file put under its old name, pulled together. The edit's delta download got the
   * server's current content (the new file) and recorded it under the edit's revision; the
   * rename then carried that file here as if it were the edit, and echo checks kept it: the
   * renamed file held other content than the server. A delta whose target is not the feed
   * entry's content is now left to the later change that explains it.
   */
  it('a large edit, rename and new file under the old name there, pulled together, come down right', () =>
    withCloud(async (cloud) => {
      const a = await cloud.addDevice('laptop', { smallFileBytes: 64 });
      const b = await cloud.addDevice('desktop', { smallFileBytes: 64 });
      const big = (s: string): string => s.repeat(40);
      await a.write('f.txt', big('first version '));
      await a.sync();
      await b.sync();
      await a.write('f.txt', big('edited there '));
      await a.sync();
      await a.mv('f.txt', 'g.txt');
      await a.sync();
      await a.write('f.txt', big('new file under the old name '));
      await a.sync();
      await b.sync();
      expect(await b.read('g.txt')).toBe(big('edited there '));
      expect(await b.read('f.txt')).toBe(big('new file under the old name '));
      await converged(cloud);
    }, 64));
  /**
   * folderFetchedAheadOfFeed (seed 1183): a folder renamed there (D→d), renamed back (d→D),
   * then a file put into a new d, pulled together. The first rename brings d down as the
   * server holds it now — with the later file in it; the second carried that file into D,
   * where the server has none: a copy on devices only. After a folder rename here the engine
   * now drops what the server's folder lacks (synced content only; edits are kept).
   */
  it('a folder renamed there and back, with a file put under the first name, comes down once', () =>
    withCloud(async (cloud) => {
      const [a, b] = await pair(cloud);
      await a.write('D/old.txt', 'known to both');
      await a.sync();
      await b.sync();
      await a.mv('D', 'd');
      await a.sync();
      await a.mv('d', 'D');
      await a.sync();
      await a.write('d/new.txt', 'put into a new d');
      await a.sync();
      await b.sync();
      expect(await b.tree()).toEqual(await a.tree());
      await converged(cloud);
    }));
  /**
   * moveThenDeleteDropsRevision (seed 1070): offline, a file renamed and the new name then
   * deleted; the queue merges that into a delete at the origin (coalesce R8) — without the
   * revision, so when it went up it removed the new file another device had put under the
   * old name meanwhile. The delete at the origin now keeps the revision it removes.
   */
  it('a rename then delete made offline does not remove a new file put under the old name there', () =>
    withCloud(async (cloud) => {
      const [a, b] = await pair(cloud);
      await a.write('c.txt', 'first');
      await a.sync();
      await b.sync();
      b.offline = true;
      await b.mv('c.txt', 'm.txt');
      await b.sync();
      await b.rm('m.txt');
      await b.sync();
      await a.rm('c.txt');
      await a.sync();
      await a.write('c.txt', 'new there');
      await a.sync();
      b.offline = false;
      await b.sync();
      await converged(cloud);
      expect(cloud.serverTree().get('c.txt')).toBe(sha256('new there'));
    }));

  /**
   * moveToCopyWithoutBase (seed 1632): a file renamed offline onto a name another device
   * then took, while the source there was deleted and a new file put under its name. The
   * refused rename went on to a conflicted-copy name (D24) by a server move, which applies
   * whatever its base: it carried the new file from the source to the copy, while here our
   * file was renamed to the copy — the copy held other content here than there. The
   * pull, before that, had also taken the file put at the destination for an edit of ours
   * (D8) and the delete of the source as applying to us. Now the pull holds changes at a
   * queued move's ends until the push (sync/discovery/held.ts), and D24 moves there only
   * what ours was synced from; otherwise ours goes up as new under the copy name.
   */
  it('a rename onto a name taken meanwhile, whose source was replaced there, keeps one copy everywhere (D24)', () =>
    withCloud(async (cloud) => {
      const [a, b] = await pair(cloud);
      await a.write('A.txt', 'ours');
      await a.sync();
      await b.sync();
      a.offline = true;
      await a.mv('A.txt', 'A.moved');
      await a.sync();
      await b.rm('A.txt');
      await b.sync();
      await b.write('A.txt', 'new there');
      await b.write('A.moved', 'taken there');
      await b.sync();
      a.offline = false;
      await a.sync();
      await converged(cloud);
      const t = cloud.serverTree();
      expect(t.get('A.txt')).toBe(sha256('new there'));
      expect(t.get('A.moved')).toBe(sha256('taken there'));
      const copies = [...t.keys()].filter((p) => p.includes('conflicted copy'));
      expect(copies).toHaveLength(1);
      expect(t.get(copies[0] ?? '')).toBe(sha256('ours'));
    }));

  /**
   * untriaged → folderEmptiedThere (seed 1262): a folder renamed offline here (a new file
   * put into it first) while another device deleted it with its files. Our put recreates
   * the folder there, our rename moves that; the echo of the rename (D21: we hold the
   * destination already) fetched the folder without dropping what the server's lacks, so
   * the files deleted there stayed here, synced, for good.
   */
  it('a folder renamed offline while deleted there keeps only what the server has (D21)', () =>
    withCloud(async (cloud) => {
      const [a, b] = await pair(cloud);
      await a.write('D/a.txt', 'a');
      await a.write('D/c.txt', 'c');
      await a.sync();
      await b.sync();
      b.offline = true;
      await b.write('D/b.txt', 'new here');
      await b.sync();
      await b.mv('D', 'e');
      await b.write('e/a.txt', 'edited here');
      await b.sync();
      await a.rm('D');
      await a.sync();
      b.offline = false;
      await b.sync();
      await converged(cloud);
      const t = cloud.serverTree();
      expect(t.get('e/b.txt')).toBe(sha256('new here'));
      expect(t.get('e/a.txt')).toBe(sha256('edited here'));
      expect(t.has('e/c.txt')).toBe(false);
    }));

  /**
   * heldDeleteNotNarrowed (seed 277, a regression of the hold above, found by the 2,000-seed
   * run): offline, a folder renamed and the new name then deleted; the scan merges the two
   * into a delete of the folder (coalesce R8). Another device had put a file into the folder
   * meanwhile; the pull held it (a move was queued then), so the delete went up without
   * knowing it and removed it. Held paths no queued move touches now come in before the push.
   */
  it('a folder renamed then deleted offline spares a file put into it there meanwhile', () =>
    withCloud(async (cloud) => {
      const [a, b] = await pair(cloud);
      await a.write('D/old.txt', 'known to both');
      await a.sync();
      await b.sync();
      b.offline = true;
      await b.mv('D', 'e');
      await b.sync();
      await a.write('D/new.txt', 'new there');
      await a.sync();
      await b.rm('e');
      b.offline = false;
      await b.sync();
      await converged(cloud);
      expect(cloud.serverTree().get('D/new.txt')).toBe(sha256('new there'));
    }));
  /**
   * adoptWrongFile (seed 1512, found by the 2,000-seed run): offline, a file edited (its put
   * queued), then moved away and a new file made at its old name; meanwhile another device
   * replaced the file there. Back online, the put (sending the moved file's content) meets
   * theirs and the server keeps ours under a conflicted-copy name (D23); the engine then
   * renamed whatever stood at the path here — the new file — to that copy name, so the copy
   * held other content here than on the server and the new file never went up. Ours is
   * adopted now only when the file here is what the copy holds; else the copy comes down.
   */
  it('a conflicted put of a file moved away meanwhile leaves the new file at its name alone (D23)', () =>
    withCloud(async (cloud) => {
      const [a, b] = await pair(cloud);
      await a.write('A.txt', 'v1');
      await a.sync();
      await b.sync();
      a.offline = true;
      await a.write('A.txt', 'edited here');
      await a.sync(); // the put is queued
      await a.mv('A.txt', 'c.moved');
      await a.sync(); // the move behind it: the put sends c.moved's content
      await a.write('A.txt', 'new file here');
      await a.sync();
      await b.rm('A.txt');
      await b.write('A.txt', 'made there');
      await b.sync();
      a.offline = false;
      await a.sync();
      await converged(cloud);
      const contents = [...cloud.serverTree().values()];
      for (const c of ['edited here', 'new file here', 'made there']) expect(contents).toContain(sha256(c));
    }));

  /**
   * refusedMkdirDropped: the server refuses a folder creation for a reason of its own (D26),
   * in the same request as a refused rename. The refusal took the mkdir off the queue and
   * the whole-folder compare does not bring back what was never sent, nor does the scan
   * (it knows the folder): the folder stayed on this device only. It is now sent once more.
   */
  it('a refused folder creation is sent again (D26)', () =>
    withCloud(async (cloud) => {
      const [a, b] = await pair(cloud);
      await a.write('x.txt', 'kept');
      await a.sync();
      await b.sync();
      await a.mv('x.txt', 'y.txt');
      await a.mkdir('D');
      a.remote.refuseNextOp((op) => op.op === 'move', 'INTERNAL');
      a.remote.refuseNextOp((op) => op.op === 'mkdir', 'INTERNAL');
      await a.sync();
      await converged(cloud);
      expect(cloud.serverTree().get('D')).toBe('dir');
      expect(await b.exists('D')).toBe(true);
    }));

  /** The same, refused every time: sent once more only, shown as an error, the rest syncs. */
  it('a folder creation refused again is shown, not sent in a loop (D26)', () =>
    withCloud(async (cloud) => {
      const [a] = await pair(cloud);
      await a.mkdir('D');
      await a.write('z.txt', 'goes up');
      for (let i = 0; i < 3; i++) a.remote.refuseNextOp((op) => op.op === 'mkdir', 'INTERNAL');
      const opsBefore = a.remote.calls.get('ops') ?? 0;
      await a.sync();
      expect(a.engine.error).toBeUndefined();
      expect(cloud.serverTree().get('z.txt')).toBe(sha256('goes up'));
      expect(cloud.serverTree().has('D')).toBe(false);
      expect((a.remote.calls.get('ops') ?? 0) - opsBefore).toBe(2);
      const errors = a.engine.getStatus().recent.filter((e) => e.kind === 'error' && e.path === 'D');
      expect(errors.length).toBeGreaterThan(0);
    }));
  /**
   * reservedNameBlocksAll: a file renamed here to a name the server reserves for its own
   * link files (`*.weftlink`, api.md "Names"). The server refuses the whole ops request with
   * INVALID_PATH, so every pass failed and nothing else synced. The scanner now skips such a
   * name with a warning, as it does names Weft cannot send; the rest syncs.
   */
  it('a file renamed to a reserved name is skipped with a warning, the rest syncs', () =>
    withCloud(async (cloud) => {
      const [a, b] = await pair(cloud);
      await a.write('x.txt', 'x');
      await a.sync();
      await b.sync();
      await a.mv('x.txt', 'x.WeftLink');
      await a.mkdir('D');
      await a.write('D/y.txt', 'goes up');
      await a.sync();
      expect(a.engine.error).toBeUndefined();
      expect(a.engine.getStatus().warnings.some((w) => w.includes('x.WeftLink'))).toBe(true);
      expect(await a.read('x.WeftLink')).toBe('x');
      const t = cloud.serverTree();
      expect(t.get('D/y.txt')).toBe(sha256('goes up'));
      expect([...t.keys()].some((p) => p.toLowerCase().endsWith('.weftlink'))).toBe(false);
      await b.sync();
      expect(await b.read('D/y.txt')).toBe('goes up');
      expect(b.engine.error).toBeUndefined();
    }));
});
