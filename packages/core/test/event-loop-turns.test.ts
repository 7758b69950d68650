/**
 * The agent keeps answering its UI while it works through a large drop (issue #16: a
 * 100,000-file first sync left the status unanswered for up to 3 s). What held the event
 * loop is now done in bounded steps with turns between them; these tests count the steps,
 * never the time: a burst of activity is one transaction on the next turn, and a bundle's
 * outcomes leave the queue at most OUTCOMES_PER_TRANSACTION files per turn.
 */
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Journal } from '../src/journal/journal.ts';
import { OUTCOMES_PER_TRANSACTION } from '../src/sync/propagate/upload-bundle.ts';
import { FakeCloud } from './support/fake-cloud.ts';

const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('the agent keeps its event loop turning', () => {
  let cloud: FakeCloud | undefined;
  afterEach(async () => {
    await cloud?.close();
    cloud = undefined;
  });

  it('writes a burst of activity once, on the next turn, and only the items it keeps', async () => {
    const dir = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-turns-'));
    const j = new Journal(nodePath.join(dir, 'journal.db'));
    const rows = (): number =>
      Number((j.db.prepare('SELECT COUNT(*) AS n FROM activity').get() as { n: bigint }).n);
    for (let i = 0; i < 1000; i++) j.addActivity({ atMs: i, kind: 'uploaded', path: `f${i}` });
    expect(rows()).toBe(0); // nothing written within the turn that recorded them
    await turn();
    expect(rows()).toBe(Journal.ACTIVITY_KEPT);
    // One transaction wrote only the kept items: row ids were never spent on the others.
    const maxId = Number((j.db.prepare('SELECT MAX(id) AS n FROM activity').get() as { n: bigint }).n);
    expect(maxId).toBe(Journal.ACTIVITY_KEPT);
    expect(j.recentActivity()[0]).toEqual({ atMs: 999, kind: 'uploaded', path: 'f999' });
    expect(j.flushActivity()).toBe(0); // nothing left over
    // Recorded just before closing: written by close, not lost.
    j.addActivity({ atMs: 5000, kind: 'error', path: 'x', detail: 'refused' });
    j.close();
    const again = new Journal(nodePath.join(dir, 'journal.db'));
    expect(again.recentActivity()[0]).toEqual({ atMs: 5000, kind: 'error', path: 'x', detail: 'refused' });
    again.close();
  });

  it("records a bundle's outcomes a bounded number of files per turn", async () => {
    cloud = new FakeCloud();
    const d = await cloud.addDevice('laptop');
    const files = 5 * OUTCOMES_PER_TRANSACTION;
    for (let i = 0; i < files; i++) await d.write(`drop/f${i}.txt`, `content ${i}`);
    // The queue's length once per turn of the event loop: what one turn took off it.
    const taken: number[] = [];
    let last = -1;
    let watching = true;
    const watch = (): void => {
      const n = d.engine.journal.isOpen ? d.engine.journal.pendingCount() : 0;
      if (last >= 0 && n < last) taken.push(last - n);
      last = n;
      if (watching) setImmediate(watch);
    };
    setImmediate(watch);
    await d.sync();
    watching = false;
    watch(); // the last turn's
    expect(d.engine.journal.pendingCount()).toBe(0);
    expect(cloud.serverTree().size).toBe(files + 1); // one bundle's worth, and the folder
    // In steps (one may share its turn with the queue's last enqueue, and not show).
    expect(taken.length).toBeGreaterThanOrEqual(files / OUTCOMES_PER_TRANSACTION - 1);
    expect(Math.max(...taken)).toBeLessThanOrEqual(OUTCOMES_PER_TRANSACTION);
  });
});
