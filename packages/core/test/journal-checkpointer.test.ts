/**
 * The journal's WAL checkpoints run in a worker thread, not on the agent's event loop
 * (journal/checkpointer.ts; issue #16: a checkpoint's disk sync held the loop 234 ms in a
 * 1,000,000-file first scan). The agent's connection checkpoints nothing while the worker
 * runs, the worker keeps the WAL from growing, nothing committed is lost, and a worker that
 * cannot start or dies hands the checkpoints back to the connection.
 */
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Checkpointer } from '../src/journal/checkpointer.ts';
import { Journal } from '../src/journal/journal.ts';

const dirs: string[] = [];
async function scratch(): Promise<string> {
  const d = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-ckpt-'));
  dirs.push(d);
  return d;
}
afterEach(async () => {
  for (const d of dirs.splice(0)) await fsp.rm(d, { recursive: true, force: true });
});

const autocheckpoint = (j: Journal): number => Number(j.db.pragma('wal_autocheckpoint', { simple: true }));

/** ~`mib` MiB of rows in transactions of 1,000, in a table of the test's own. */
function write(j: Journal, mib: number, tag: string): void {
  j.db.exec('CREATE TABLE IF NOT EXISTS t (k TEXT PRIMARY KEY, v BLOB)');
  const ins = j.db.prepare('INSERT INTO t (k, v) VALUES (?, ?)');
  const rows = (mib * 1024 * 1024) / 1024;
  for (let start = 0; start < rows; start += 1000)
    j.db.transaction(() => {
      for (let i = start; i < Math.min(rows, start + 1000); i++)
        ins.run(`${tag}-${i}`, Buffer.alloc(1024, i % 251));
    })();
}

describe('the journal’s checkpoints in a worker thread', () => {
  it('closed() resolves once the worker has ended: nothing touches the folder after it (a journal closed while its worker starts)', async () => {
    // An engine stopped right after it started (tests do it often): the worker was still
    // starting and opened the database after the engine's folder was being removed (CI:
    // ENOTEMPTY in a FakeCloud cleanup). Each round: open, close at once, await closed(),
    // then the folder must stay as it is and be removable.
    for (let round = 0; round < 12; round++) {
      const dir = await scratch();
      const j = new Journal(nodePath.join(dir, 'journal.db'));
      expect(j.checkpointer?.stats.ended).toBe(false);
      j.close();
      await j.closed();
      expect(j.checkpointer?.stats.ended, `round ${round}`).toBe(true);
      const listed = fs.readdirSync(dir).sort();
      await new Promise((resolve) => setTimeout(resolve, 150));
      expect(fs.readdirSync(dir).sort(), `round ${round}`).toEqual(listed);
      await fsp.rm(dir, { recursive: true });
    }
  });

  it('the agent’s connection checkpoints nothing; the worker keeps the WAL small; nothing is lost', async () => {
    const file = nodePath.join(await scratch(), 'journal.db');
    const j = new Journal(file);
    const c = j.checkpointer!;
    await c.ready();
    expect(c.stats.running).toBe(true);
    expect(autocheckpoint(j)).toBe(0);
    write(j, 16, 'a');
    await expect.poll(() => c.stats.pages > 0, { timeout: 10_000, interval: 20 }).toBe(true);
    const afterFirst = fs.statSync(`${file}-wal`).size;
    // Four more bursts, each checkpointed before the next: the WAL is started over, not grown.
    for (const tag of ['b', 'c', 'd', 'e']) {
      const pages = c.stats.pages;
      write(j, 16, tag);
      await expect.poll(() => c.stats.pages > pages, { timeout: 10_000, interval: 20 }).toBe(true);
    }
    expect(fs.statSync(`${file}-wal`).size).toBeLessThan(afterFirst * 2);
    j.close();
    const again = new Journal(file, { checkpointInWorker: false });
    expect(Number(again.db.prepare('SELECT COUNT(*) AS n FROM t').pluck().get())).toBe(5 * 16 * 1024);
    again.close();
  });

  it('a worker that dies hands the checkpoints back to the connection', async () => {
    const j = new Journal(nodePath.join(await scratch(), 'journal.db'));
    const c = j.checkpointer!;
    await c.ready();
    expect(autocheckpoint(j)).toBe(0);
    await c.killWorker();
    await expect.poll(() => c.stats.running, { timeout: 10_000, interval: 20 }).toBe(false);
    expect(autocheckpoint(j)).toBe(1000);
    write(j, 1, 'x'); // still writes
    j.close();
  });

  it('a worker that cannot start leaves the connection checkpointing itself', async () => {
    const file = nodePath.join(await scratch(), 'journal.db');
    const j = new Journal(file, { checkpointInWorker: false });
    expect(autocheckpoint(j)).toBe(1000);
    j.db.pragma('wal_autocheckpoint = 0'); // as if the worker had taken over, then…
    const c = Checkpointer.start(j.db, file, { module: nodePath.join(os.tmpdir(), 'no-such-sqlite.js') });
    await c.ready();
    await expect.poll(() => autocheckpoint(j), { timeout: 10_000, interval: 20 }).toBe(1000);
    expect(c.stats.running).toBe(false);
    c.close();
    j.close();
  });
});
