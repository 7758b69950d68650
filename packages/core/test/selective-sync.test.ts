/**
 * Selective sync on the engine harness (support/fake-cloud.ts): a folder left out frees its
 * local space and deletes nothing on the server; selected again, it comes back; changes made
 * here before it was left out are uploaded first; what is made here in a left-out folder is
 * kept as a selective-sync conflict; the choice survives a restart.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { SelectionError } from '../src/selection.ts';
import { FakeCloud, localTree, sha256, sorted } from './support/fake-cloud.ts';

let cloud: FakeCloud | undefined;
afterEach(async () => {
  await cloud?.close();
  cloud = undefined;
});

async function twoDevices() {
  cloud = new FakeCloud();
  const a = await cloud.addDevice('a');
  const b = await cloud.addDevice('b');
  await a.write('Photos/2019/beach.jpg', 'sand');
  await a.write('Photos/2020/snow.jpg', 'ice');
  await a.write('Docs/cv.txt', 'me');
  await a.write('top.txt', 'top');
  await cloud.settle();
  expect(await b.read('Photos/2019/beach.jpg')).toBe('sand');
  return { cloud, a, b };
}

describe('selective sync', () => {
  it('leaving a folder out frees the space here and deletes nothing on the server', async () => {
    const { cloud, a, b } = await twoDevices();
    const serverBefore = sorted(cloud.serverTree());
    const seqBefore = cloud.seq;
    b.engine.setExcludedFolders(['Photos']);
    await b.sync();
    expect(await b.exists('Photos')).toBe(false);
    expect(await b.read('Docs/cv.txt')).toBe('me');
    expect(sorted(cloud.serverTree())).toEqual(serverBefore);
    expect(cloud.seq).toBe(seqBefore);
    expect(b.engine.journal.filesUnder('Photos')).toEqual([]);
    expect(b.engine.selective.current.entries()).toEqual([['Photos', 'excluded']]);
    // Nothing was deleted: Recent activity does not say so (nor offer to restore it).
    expect(b.engine.getStatus().recent.filter((r) => r.kind === 'deleted')).toEqual([]);

    // Changes under it elsewhere are not downloaded; the rest still syncs both ways.
    await a.write('Photos/2021/new.jpg', 'new');
    await a.write('Docs/cv.txt', 'me v2');
    await a.mv('Docs/cv.txt', 'Photos/cv.txt');
    await b.write('Docs/notes.txt', 'from b');
    await cloud.settle();
    expect(await b.exists('Photos')).toBe(false);
    expect(await b.exists('Docs/cv.txt')).toBe(false); // moved into the left-out folder
    expect(cloud.serverTree().get('Photos/cv.txt')).toBe(sha256('me v2'));
    expect(cloud.serverTree().get('Photos/2019/beach.jpg')).toBe(sha256('sand'));
    expect(await a.read('Docs/notes.txt')).toBe('from b');
    // The server's folders are still listed for Settings, marked as left out.
    const { folders } = await b.engine.selective.folders('');
    expect(folders.map((f) => [f.path, f.selected])).toEqual([
      ['Docs', true],
      ['Photos', false],
    ]);

    // Selected again: downloaded, as the server holds it now.
    b.engine.setExcludedFolders([]);
    await b.sync();
    expect(await b.read('Photos/2019/beach.jpg')).toBe('sand');
    expect(await b.read('Photos/2021/new.jpg')).toBe('new');
    expect(await b.read('Photos/cv.txt')).toBe('me v2');
    expect(b.engine.selective.current.entries()).toEqual([]);
    await cloud.settle();
    expect(sorted(await b.tree())).toEqual(sorted(await a.tree()));
  });

  it('a nested folder can be left out, and kept out when its parent comes back', async () => {
    const { cloud, a, b } = await twoDevices();
    b.engine.setExcludedFolders(['Photos/2019']);
    await b.sync();
    expect(await b.exists('Photos/2019')).toBe(false);
    expect(await b.read('Photos/2020/snow.jpg')).toBe('ice');
    // Leave out the whole of Photos, then take it back but keep 2019 out.
    b.engine.setExcludedFolders(['Photos']);
    await b.sync();
    expect(await b.exists('Photos')).toBe(false);
    b.engine.setExcludedFolders(['Photos/2019']);
    await b.sync();
    expect(await b.read('Photos/2020/snow.jpg')).toBe('ice');
    expect(await b.exists('Photos/2019')).toBe(false);
    expect(b.engine.selective.current.entries()).toEqual([['Photos/2019', 'excluded']]);
    await a.write('Photos/2019/late.jpg', 'late');
    await cloud.settle();
    expect(await b.exists('Photos/2019')).toBe(false);
    expect(cloud.serverTree().get('Photos/2019/late.jpg')).toBe(sha256('late'));
    expect((await b.engine.checkConsistency()).paths).toEqual([]);
  });

  it('changes made here before the folder was left out are uploaded first, never lost', async () => {
    const { cloud, a, b } = await twoDevices();
    // Edited and created here, not synced yet; then left out while offline.
    await b.write('Photos/2019/beach.jpg', 'sand, edited on b');
    await b.write('Photos/2019/new-on-b.jpg', 'fresh');
    b.offline = true;
    b.engine.setExcludedFolders(['Photos']);
    await b.sync().catch(() => undefined);
    // Still here: its changes wait to be uploaded.
    expect(await b.read('Photos/2019/beach.jpg')).toBe('sand, edited on b');
    expect(b.engine.selective.current.state('Photos')).toBe('leaving');
    expect(cloud.serverTree().get('Photos/2019/beach.jpg')).toBe(sha256('sand'));
    b.offline = false;
    await b.sync();
    expect(cloud.serverTree().get('Photos/2019/beach.jpg')).toBe(sha256('sand, edited on b'));
    expect(cloud.serverTree().get('Photos/2019/new-on-b.jpg')).toBe(sha256('fresh'));
    expect(await b.exists('Photos')).toBe(false);
    expect(b.engine.selective.current.state('Photos')).toBe('excluded');
    await cloud.settle();
    expect(await a.read('Photos/2019/new-on-b.jpg')).toBe('fresh');
  });

  it('a left-out folder stays left out when it or its parent is renamed elsewhere', async () => {
    const { cloud, a, b } = await twoDevices();
    b.engine.setExcludedFolders(['Photos/2019']);
    await b.sync();
    await a.mv('Photos', 'Pictures');
    await cloud.settle();
    expect(b.engine.selective.current.entries()).toEqual([['Pictures/2019', 'excluded']]);
    expect(await b.read('Pictures/2020/snow.jpg')).toBe('ice');
    expect(await b.exists('Pictures/2019')).toBe(false);
    await a.mv('Pictures/2019', 'Pictures/Old');
    await a.write('Pictures/Old/more.jpg', 'more');
    await cloud.settle();
    expect(b.engine.selective.current.entries()).toEqual([['Pictures/Old', 'excluded']]);
    expect(await b.exists('Pictures/Old')).toBe(false);
    expect(cloud.serverTree().get('Pictures/Old/beach.jpg')).toBe(sha256('sand'));
    expect((await b.engine.checkConsistency()).paths).toEqual([]);
    // Renamed here (the parent): the feed's echo of our own move carries the choice along.
    await b.mv('Pictures', 'Images');
    await cloud.settle();
    expect(b.engine.selective.current.entries()).toEqual([['Images/Old', 'excluded']]);
    expect(cloud.serverTree().get('Images/Old/more.jpg')).toBe(sha256('more'));
    expect(await b.exists('Images/Old')).toBe(false);
    expect(await a.read('Images/Old/more.jpg')).toBe('more');
  });

  it('a leaving folder whose changes could not go up (storage full, say) is not removed', async () => {
    const { cloud, b } = await twoDevices();
    await b.write('Photos/2019/beach.jpg', 'edited, not uploaded');
    await b.write('Photos/new.jpg', 'new, not uploaded');
    b.offline = true;
    b.engine.setExcludedFolders(['Photos']);
    await b.sync().catch(() => undefined); // scanned and queued; the push cannot run
    // The step that removes a folder, run as after a push that left uploads waiting.
    await b.engine.selective.afterPush();
    expect(await b.read('Photos/2019/beach.jpg')).toBe('edited, not uploaded');
    expect(await b.read('Photos/new.jpg')).toBe('new, not uploaded');
    expect(b.engine.selective.current.state('Photos')).toBe('leaving');
    // An edit made after the scan, with nothing queued for it, is caught by its content hash.
    b.offline = false;
    await b.sync();
    expect(cloud.serverTree().get('Photos/new.jpg')).toBe(sha256('new, not uploaded'));
    b.engine.setExcludedFolders([]);
    await b.sync();
    await b.write('Photos/2020/snow.jpg', 'edited after the scan');
    b.offline = true;
    b.engine.setExcludedFolders(['Photos']);
    await b.engine.selective.afterPush();
    expect(await b.read('Photos/2020/snow.jpg')).toBe('edited after the scan');
    expect(b.engine.selective.current.state('Photos')).toBe('leaving');
    b.offline = false;
    await b.sync();
    expect(await b.exists('Photos')).toBe(false);
    expect(cloud.serverTree().get('Photos/2020/snow.jpg')).toBe(sha256('edited after the scan'));
  });

  it('a folder being left out and then deleted here by hand is not deleted on the server', async () => {
    const { cloud, a, b } = await twoDevices();
    b.offline = true;
    b.engine.setExcludedFolders(['Photos']);
    await b.sync().catch(() => undefined);
    expect(b.engine.selective.current.state('Photos')).toBe('leaving');
    await b.rm('Photos');
    b.offline = false;
    await cloud.settle();
    expect(b.engine.selective.current.state('Photos')).toBe('excluded');
    expect(cloud.serverTree().get('Photos/2019/beach.jpg')).toBe(sha256('sand'));
    expect(await a.read('Photos/2020/snow.jpg')).toBe('ice');
  });

  it('ignored files in a left-out folder go to the local trash, not away', async () => {
    const { cloud, b } = await twoDevices();
    await b.write('Photos/.DS_Store', 'finder');
    b.engine.setExcludedFolders(['Photos']);
    await b.sync();
    expect(await b.exists('Photos')).toBe(false);
    const trash = await localTree(`${b.stateDir}/trash`);
    expect(
      [...trash.entries()].some(([p, h]) => p.endsWith('Photos/.DS_Store') && h === sha256('finder')),
    ).toBe(true);
    expect(cloud.serverTree().has('Photos/.DS_Store')).toBe(false);
  });

  it('a folder made here in place of a left-out one is kept as a selective sync conflict', async () => {
    const { cloud, a, b } = await twoDevices();
    b.engine.setExcludedFolders(['Photos']);
    await b.sync();
    await b.write('Photos/mine.jpg', 'made on b');
    await b.sync();
    expect(await b.exists('Photos')).toBe(false);
    expect(await b.read('Photos (selective sync conflict)/mine.jpg')).toBe('made on b');
    await cloud.settle();
    expect(cloud.serverTree().get('Photos (selective sync conflict)/mine.jpg')).toBe(sha256('made on b'));
    expect(cloud.serverTree().has('Photos/mine.jpg')).toBe(false);
    expect(await a.read('Photos (selective sync conflict)/mine.jpg')).toBe('made on b');
    expect(await a.read('Photos/2019/beach.jpg')).toBe('sand');
  });

  it('the choice is kept in the journal across a restart', async () => {
    const { cloud, a, b } = await twoDevices();
    b.engine.setExcludedFolders(['Photos']);
    await b.sync();
    // As a crash between the rename and the delete of a removal leaves it: swept to the trash.
    await b.restart({}, () => b.write('.weft-partial-evict-0badc0de/2019/beach.jpg', 'sand'));
    expect(b.engine.selective.current.entries()).toEqual([['Photos', 'excluded']]);
    await b.sync();
    expect(await b.exists('.weft-partial-evict-0badc0de')).toBe(false);
    const trash = await localTree(`${b.stateDir}/trash`);
    expect(
      [...trash].some(([p, h]) => p.endsWith('evict-0badc0de/2019/beach.jpg') && h === sha256('sand')),
    ).toBe(true);
    await a.write('Photos/2022/x.jpg', 'x');
    await cloud.settle();
    expect(await b.exists('Photos')).toBe(false);
  });

  it('a folder moved out of a left-out one elsewhere comes down; the consistency check finds nothing to repair', async () => {
    const { cloud, a, b } = await twoDevices();
    b.engine.setExcludedFolders(['Photos']);
    await b.sync();
    await a.mv('Photos/2019', 'Docs/2019');
    await cloud.settle();
    expect(await b.read('Docs/2019/beach.jpg')).toBe('sand');
    expect(await b.exists('Photos')).toBe(false);
    // The server holds Photos, this device does not: not a difference to repair.
    const check = await b.engine.checkConsistency();
    expect(check.paths).toEqual([]);
    expect(await b.exists('Photos')).toBe(false);
  });

  it('bad input is refused and changes nothing', async () => {
    const { b } = await twoDevices();
    b.engine.setExcludedFolders(['Docs']);
    for (const bad of [[''], ['../x'], ['/abs'], ['a//b'], [42]] as unknown[][])
      expect(() => b.engine.setExcludedFolders(bad)).toThrow(SelectionError);
    expect(b.engine.selective.current.deselected()).toEqual(['Docs']);
  });
});
