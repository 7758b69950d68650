/**
 * A full reconcile (first sync, or a feed the server reset) finds what the server deleted by
 * reading the journal's index a page at a time (Journal.indexUnderPaged), never every whole
 * row at once (issue #16: a 1,000,000-file journal's rows are hundreds of MiB of objects).
 * Counted: whole-table reads during the pass (none), and the remote deletes it applied.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { FakeCloud } from './support/fake-cloud.ts';

let cloud: FakeCloud | undefined;
afterEach(async () => {
  await cloud?.close();
  cloud = undefined;
});

describe('full reconcile', () => {
  it('applies remote deletes from the index read a page at a time', async () => {
    cloud = new FakeCloud();
    const a = await cloud.addDevice('a', { watch: false, settleMs: 0 });
    const b = await cloud.addDevice('b', { watch: false, settleMs: 0 });
    for (let i = 0; i < 30; i++) await a.write(`d${i % 3}/f${i}.txt`, `file ${i}`);
    await a.sync();
    await b.sync();
    expect(await b.exists('d1/f1.txt')).toBe(true);
    // Deleted on a while b does not follow the feed: b's next pull lists everything.
    await a.rm('d1/f1.txt');
    await a.rm('d2');
    await a.sync();
    b.engine.journal.setMeta('cursor', '');
    let wholeReads = 0;
    const journal = b.engine.journal;
    const allFiles = journal.allFiles.bind(journal);
    journal.allFiles = () => {
      wholeReads += 1;
      return allFiles();
    };
    await b.sync();
    expect(wholeReads).toBe(0);
    expect(await b.exists('d1/f1.txt')).toBe(false);
    expect(await b.exists('d2')).toBe(false);
    expect(await b.exists('d1/f4.txt')).toBe(true);
    expect(journal.getFile('d2/f2.txt')).toBeUndefined();
  });
});
