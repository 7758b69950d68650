/**
 * The engine names the decision-table row it takes (docs/sync-decisions.md) in its traces
 * and activity, its recent activity survives a restart, and the hand-coded branches that
 * became rows (D12, D19, D20, D10) behave as the table says — against the in-memory server.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { FakeCloud, type FakeDevice, sha256 } from './support/fake-cloud.ts';

interface Decided {
  path: string;
  row: string;
  action: string;
}

async function traced(cloud: FakeCloud, name: string): Promise<{ d: FakeDevice; decided: Decided[] }> {
  const decided: Decided[] = [];
  const d = await cloud.addDevice(name, {
    trace: (event, detail) => {
      if (event === 'decide') decided.push(detail as Decided);
    },
  });
  return { d, decided };
}

describe('engine: decision rows, activity', () => {
  let cloud: FakeCloud;
  afterEach(() => cloud.close());

  it('recent activity names its row and survives a restart', async () => {
    cloud = new FakeCloud();
    const a = await cloud.addDevice('laptop');
    const b = await cloud.addDevice('desktop');
    await a.write('notes.txt', 'one');
    await a.sync();
    await b.sync();
    const before = b.engine.getStatus().recent;
    expect(before[0]).toMatchObject({ kind: 'downloaded', path: 'notes.txt', row: 'D3' });
    await b.restart();
    // A new engine, a new status model: the activity comes back from the journal.
    expect(b.engine.getStatus().recent).toEqual(before);
    await a.write('notes.txt', 'two');
    await a.sync();
    await b.sync();
    const after = b.engine.getStatus().recent;
    expect(after[0]).toMatchObject({ kind: 'downloaded', path: 'notes.txt', row: 'D8' });
    expect(after.slice(1)).toEqual(before);
  });

  it('both edited differently: D10 keeps both, and the trace and the activity say D10', async () => {
    cloud = new FakeCloud();
    const a = await cloud.addDevice('laptop');
    const { d: b, decided } = await traced(cloud, 'desktop');
    await a.write('plan.txt', 'base');
    await a.sync();
    await b.sync();
    await a.write('plan.txt', 'theirs');
    await a.sync();
    await b.write('plan.txt', 'ours');
    await b.sync();
    expect(decided.find((x) => x.path === 'plan.txt' && x.row === 'D10')).toMatchObject({
      action: 'conflict',
    });
    expect(b.engine.getStatus().recent.find((x) => x.kind === 'conflicted')).toMatchObject({
      path: 'plan.txt',
      row: 'D10',
    });
    await cloud.settle();
    const contents = [...cloud.serverTree().values()];
    expect(contents).toContain(sha256('ours'));
    expect(contents).toContain(sha256('theirs'));
  });

  it('a folder deleted there keeps what was edited here (D19); an unchanged one goes to the trash (D12)', async () => {
    cloud = new FakeCloud();
    const a = await cloud.addDevice('laptop');
    const { d: b, decided } = await traced(cloud, 'desktop');
    await a.write('keep/x.txt', 'x');
    await a.write('keep/y.txt', 'y');
    await a.write('drop/z.txt', 'z');
    await a.sync();
    await b.sync();
    await b.write('keep/x.txt', 'x edited here');
    await a.rm('keep');
    await a.rm('drop');
    await a.sync();
    await b.sync();
    expect(decided.filter((x) => x.path === 'keep').map((x) => x.row)).toEqual(['D19']);
    expect(decided.filter((x) => x.path === 'drop').map((x) => x.row)).toEqual(['D12']);
    expect(await b.read('keep/x.txt')).toBe('x edited here');
    expect(await b.exists('keep/y.txt')).toBe(false);
    expect(await b.exists('drop')).toBe(false);
    await cloud.settle();
    expect(cloud.serverTree().get('keep/x.txt')).toBe(sha256('x edited here'));
    expect(cloud.serverTree().has('keep/y.txt')).toBe(false);
  });

  it('a move there is the same rename here (D20), nothing downloaded', async () => {
    cloud = new FakeCloud();
    const a = await cloud.addDevice('laptop');
    const { d: b, decided } = await traced(cloud, 'desktop');
    await a.write('old/name.txt', 'content');
    await a.sync();
    await b.sync();
    const downloads = b.remote.calls.get('download') ?? 0;
    const bundles = b.remote.calls.get('downloadBundle') ?? 0;
    await a.mv('old/name.txt', 'new/name.txt');
    await a.sync();
    await b.sync();
    expect(decided.find((x) => x.path === 'new/name.txt')).toMatchObject({
      row: 'D20',
      action: 'move-local',
    });
    expect(await b.read('new/name.txt')).toBe('content');
    expect(b.remote.calls.get('download') ?? 0).toBe(downloads);
    expect(b.remote.calls.get('downloadBundle') ?? 0).toBe(bundles);
  });

  it('a download decides again before its rename: an edit made meanwhile stays (D10), a delete gives way (D14)', async () => {
    cloud = new FakeCloud();
    const a = await cloud.addDevice('laptop');
    const { d: b, decided } = await traced(cloud, 'desktop');
    await a.write('edited.txt', 'base');
    await a.write('deleted.txt', 'base');
    await a.sync();
    await b.sync();
    await a.write('edited.txt', 'theirs');
    await a.write('deleted.txt', 'theirs');
    await a.sync();
    // Decided as D8 (edited there); while the bytes travel, the person edits one and deletes the other.
    b.remote.beforeCall = async (method) => {
      if (method !== 'downloadBundle') return;
      b.remote.beforeCall = undefined;
      await b.write('edited.txt', 'ours, typed meanwhile');
      await b.rm('deleted.txt');
    };
    await b.sync();
    const writes = decided.filter((x) => (x as unknown as { stage?: string }).stage === 'write');
    expect(writes.map((x) => `${x.path} ${x.row}`).sort()).toEqual(['deleted.txt D14', 'edited.txt D10']);
    expect(await b.read('edited.txt')).toBe('ours, typed meanwhile');
    expect(await b.read('deleted.txt')).toBe('theirs');
    const copy = b.engine.getStatus().conflicts.find((c) => c.path === 'edited.txt');
    expect(copy && (await b.read(copy.copyPath))).toBe('theirs');
  });

  it('the mass-delete guard pauses before sending the deletes; restore brings the files back', async () => {
    cloud = new FakeCloud();
    const a = await cloud.addDevice('laptop');
    for (let i = 0; i < 12; i++) await a.write(`f${i}.txt`, `file ${i}`);
    await a.sync();
    for (let i = 0; i < 12; i++) await a.rm(`f${i}.txt`);
    await a.sync();
    expect(a.engine.getStatus().state).toBe('paused');
    expect(a.engine.getStatus().error).toMatch(/delete 12 items/);
    expect(cloud.serverTree().size).toBe(12);
    await a.engine.resolveMassDelete('restore');
    await a.sync();
    expect(await a.read('f3.txt')).toBe('file 3');
    expect(cloud.serverTree().size).toBe(12);
  });
});
