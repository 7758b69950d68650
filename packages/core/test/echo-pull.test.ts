/**
 * The echoes of our own uploads (the feed brings every file we sent back) cost one indexed
 * look-up each, a page of them in one statement, not a whole journal row and an observation
 * (issue #16); an echo of a file
 * edited here since still goes the whole way (and the edit is not lost).
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { FakeCloud } from './support/fake-cloud.ts';

let cloud: FakeCloud | undefined;
afterEach(async () => {
  vi.restoreAllMocks();
  await cloud?.close();
  cloud = undefined;
});

describe('echo pull', () => {
  it('reads no whole row for the echoes of our own uploads', async () => {
    cloud = new FakeCloud();
    const d = await cloud.addDevice('laptop');
    await d.engine.waitIdle();
    for (let i = 0; i < 50; i++) await d.write(`drop/f${i}.txt`, `file ${i}`);
    // The answers' feed seqs hidden: the pull reads these echoes back, as it does for writes
    // of ours it did not note (after a restart; own-changes.ts, own-echo-skip.test.ts).
    const upload = d.remote.uploadBundle.bind(d.remote);
    d.remote.uploadBundle = async (bytes) =>
      (await upload(bytes)).map((r) => ({ ...r, result: { ...r.result, seq: 0 } }));
    await d.sync(); // uploads; their echoes come with the next pull
    // Whole rows the pull reads (the scan reads some too: these files are racily clean).
    const journal = d.engine.journal;
    const getFile = journal.getFile.bind(journal);
    const pulled: string[] = [];
    vi.spyOn(journal, 'getFile').mockImplementation((p: string) => {
      if (new Error().stack?.includes('discovery/remote.ts')) pulled.push(p);
      return getFile(p);
    });
    const oneByOne = vi.spyOn(journal, 'syncedEchoHash');
    const together = vi.spyOn(journal, 'syncedEchoHashes');
    await d.sync();
    // Looked up a page at a time (one statement), not one statement per echo.
    const asked = together.mock.calls.flatMap(([entries]) => entries.map((e) => e.path));
    expect(asked.filter((p) => p.startsWith('drop/'))).toHaveLength(50);
    expect(together.mock.calls.length).toBeLessThanOrEqual(2);
    expect(oneByOne).not.toHaveBeenCalled();
    expect(pulled.filter((p) => p.startsWith('drop/'))).toEqual([]); // the folder's own row is read
    expect(d.engine.journal.pendingCount()).toBe(0);
  });

  it('an echo of a file edited here since is observed, and the edit goes up', async () => {
    cloud = new FakeCloud();
    const d = await cloud.addDevice('laptop');
    await d.engine.waitIdle();
    await d.write('a.txt', 'one');
    await d.sync();
    // The row says the content changed here (as a scan that queued it would), the echo comes.
    const row = d.engine.journal.getFile('a.txt');
    expect(row?.syncedRev).toBeTruthy();
    if (row) d.engine.journal.upsertFile({ ...row, hash: 'edited-here' });
    expect(d.engine.journal.syncedEchoHash('a.txt', row?.syncedRev ?? '')).toBeUndefined();
    await d.write('a.txt', 'two');
    await d.sync();
    expect(await d.read('a.txt')).toBe('two');
    expect(cloud.serverTree().get('a.txt')).toBe(
      (await import('node:crypto')).createHash('sha256').update('two').digest('hex'),
    );
  });
});
