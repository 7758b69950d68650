/**
 * OutageLog (src/outage-log.ts): a round in which several calls to one replica were in
 * flight when it failed counts one failed attempt, not one per call — else a drain of 16
 * entries at once took the probe backoff to its 10-minute cap at the first outage, and a
 * replica back within seconds waited minutes (the share e2e's "not quiescent after 200
 * rounds" once the books' calls became asynchronous and more writes were in flight).
 */
import Database from 'better-sqlite3';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { MemoryProvider, QuotaExceededError } from '@weft/providers';
import { zeroMirrorStats } from '../src/context.ts';
import { OutageLog } from '../src/outage-log.ts';
import { migrate, SqliteShareStore } from '../src/store.ts';

const open: Database.Database[] = [];
afterEach(() => {
  for (const db of open.splice(0)) db.close();
});

describe('an outage log', () => {
  it('countsOneFailedAttemptPerRound_howeverManyCallsFailedInIt', async () => {
    const db = new Database(':memory:');
    open.push(db);
    migrate(db);
    const store = new SqliteShareStore(db, 's');
    let t = 1_000_000;
    const log = new OutageLog({
      store,
      log: pino({ level: 'silent' }),
      now: () => t,
      stats: zeroMirrorStats(),
      probe: { baseMs: 2000, capMs: 600_000, jitter: 'none' },
      random: () => 0.5,
    });
    const r = { id: 'cat', member: 'cat', provider: new MemoryProvider(), root: '' };
    const full = new QuotaExceededError('full');
    log.beginRound();
    // 16 writes in flight when the replica filled up: all fail in this round.
    await Promise.all(Array.from({ length: 16 }, () => log.failed(r, full, 'writing')));
    expect(await store.outage('cat')).toMatchObject({ failures: 1, nextProbeMs: t });
    await log.endRound();
    // The next round probes it; it fails again (several calls): the second attempt.
    log.beginRound();
    await Promise.all(Array.from({ length: 16 }, () => log.failed(r, full, 'writing')));
    expect(await store.outage('cat')).toMatchObject({ failures: 2, nextProbeMs: t + 2000 });
    await log.endRound();
    // Due again 2 s later; the probe goes through: available.
    t += 2000;
    log.beginRound();
    await log.endRound();
    expect(await store.outage('cat')).toBeUndefined();
    expect(log.isDown('cat')).toBe(false);
  });
});
