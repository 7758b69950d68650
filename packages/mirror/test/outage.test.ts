/**
 * A member whose cloud refuses writes for a while (account full, 503 on writes, token
 * revoked) while reads still work. The replica's backlog is its outage log: nothing is
 * given up, nothing older is written over something newer when it comes back, and its
 * state (unavailable, the cause, since when, how many changes wait) survives a restart.
 */
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { AuthError, MemoryProvider, QuotaExceededError, TransientError } from '@weft/providers';
import { FaultInjectingProvider } from '@weft/providers/testing';
import { MirrorEngine } from '../src/engine.ts';
import { migrate } from '../src/store.ts';
import { readText, text, treeOf } from './helpers.ts';

const open: Database.Database[] = [];
afterEach(() => {
  for (const db of open.splice(0)) db.close();
});

const WRITES = new Set(['write', 'remove', 'mkdir', 'move', 'copy']);

const refusals = {
  'writes answer 503': () => new TransientError('injected: 503 on writes'),
  'the account is full': () => new QuotaExceededError('injected: insufficient storage'),
  'the token was revoked': () => new AuthError('injected: token revoked'),
} as const;

function setup() {
  const db = new Database(':memory:');
  open.push(db);
  migrate(db);
  let clock = Date.UTC(2026, 10, 21, 12, 0, 0);
  const mem = ['alice', 'bob'].map((m) => new MemoryProvider({ name: m, now: () => clock }));
  const fault: { refuse?: () => Error; readsToo?: boolean } = {};
  const bob = new FaultInjectingProvider(mem[1] as MemoryProvider, {
    before(info) {
      if (!fault.refuse) return undefined;
      if (WRITES.has(info.op) || fault.readsToo) return fault.refuse();
      return undefined;
    },
  });
  const make = () =>
    new MirrorEngine({
      shareId: 's',
      db,
      now: () => (clock += 1000),
      probeBackoffMs: { first: 0, max: 0 },
      replicas: [mem[0] as MemoryProvider, bob].map((p, i) => ({
        id: `r${i}`,
        member: ['alice', 'bob'][i] ?? '',
        provider: p,
        root: '',
        wrap: { retry: { maxAttempts: 1 } },
      })),
    });
  const time = (): number => clock;
  return { db, alice: mem[0] as MemoryProvider, bob: mem[1] as MemoryProvider, fault, make, time };
}

describe('a member whose cloud refuses writes for a while', () => {
  for (const [what, refuse] of Object.entries(refusals)) {
    it(`never rolls the share back when ${what} for more rounds than any retry limit`, async () => {
      const s = setup();
      await s.alice.write('notes.txt', text('v1'));
      const engine = s.make();
      await engine.quiesce();
      expect(await readText(s.bob, 'notes.txt')).toBe('v1');

      s.fault.refuse = refuse;
      await s.alice.write('notes.txt', text('v2'));
      for (let i = 0; i < 12; i++) await engine.step();
      expect(await readText(s.bob, 'notes.txt')).toBe('v1');
      expect(await engine.pendingCount()).toBeGreaterThan(0);

      s.fault.refuse = undefined;
      await engine.quiesce();
      expect(await readText(s.alice, 'notes.txt')).toBe('v2');
      expect(await readText(s.bob, 'notes.txt')).toBe('v2');
      expect([...(await treeOf(s.bob, ''))]).toEqual([...(await treeOf(s.alice, ''))]);
    });
  }

  it('is shown unavailable with the cause, since when and what waits, the same after a restart', async () => {
    const s = setup();
    await s.alice.write('a.txt', text('a1'));
    const engine = s.make();
    await engine.quiesce();
    expect((await engine.replicaStatus()).map((r) => r.state)).toEqual(['available', 'available']);

    s.fault.refuse = refusals['the account is full'];
    const before = s.time(); // the engine's clock (injected)
    await s.alice.write('a.txt', text('a2'));
    await s.alice.write('b.txt', text('b1'));
    for (let i = 0; i < 3; i++) await engine.step();
    const bob = (await engine.replicaStatus())[1];
    expect(bob).toMatchObject({ id: 'r1', member: 'bob', state: 'unavailable', cause: 'full', waiting: 2 });
    expect(bob?.sinceMs).toBeGreaterThanOrEqual(before);
    expect(bob?.error).toContain('insufficient storage');
    expect((await engine.replicaStatus())[0]).toMatchObject({ state: 'available', waiting: 0 });

    // A restart during the outage: the state and the outage log are kept, nothing is dropped.
    await engine.stop();
    const second = s.make();
    expect((await second.replicaStatus())[1]).toMatchObject({
      state: 'unavailable',
      cause: 'full',
      sinceMs: bob?.sinceMs,
    });
    s.fault.refuse = refusals['the token was revoked'];
    for (let i = 0; i < 3; i++) await second.step();
    expect((await second.replicaStatus())[1]).toMatchObject({
      state: 'unavailable',
      cause: 'unauthorised',
      sinceMs: bob?.sinceMs,
      waiting: 2,
    });

    s.fault.refuse = undefined;
    await second.quiesce();
    expect(await second.replicaStatus()).toEqual([
      { id: 'r0', member: 'alice', state: 'available', waiting: 0 },
      { id: 'r1', member: 'bob', state: 'available', waiting: 0 },
    ]);
    expect(await readText(s.bob, 'a.txt')).toBe('a2');
    expect(await readText(s.bob, 'b.txt')).toBe('b1');
  });

  it('a whole-service outage (reads failing too) holds the replica back and the others go on', async () => {
    const s = setup();
    await s.alice.write('a.txt', text('a1'));
    const engine = s.make();
    await engine.quiesce();
    s.fault.refuse = () => new TransientError('injected: 503 on everything');
    s.fault.readsToo = true;
    await s.alice.write('a.txt', text('a2'));
    for (let i = 0; i < 12; i++) await engine.step();
    expect((await engine.replicaStatus())[1]).toMatchObject({ state: 'unavailable', cause: 'failing' });
    s.fault.refuse = undefined;
    s.fault.readsToo = false;
    await engine.quiesce();
    expect(await readText(s.alice, 'a.txt')).toBe('a2');
    expect(await readText(s.bob, 'a.txt')).toBe('a2');
  });

  it('an edit the member made during the outage ends in place or as a conflicted copy, never lost', async () => {
    const s = setup();
    await s.alice.write('n.txt', text('v1'));
    const engine = s.make();
    await engine.quiesce();
    s.fault.refuse = refusals['the token was revoked'];
    await s.alice.write('n.txt', text('alice v2'));
    for (let i = 0; i < 10; i++) await engine.step();
    // Bob edits his own copy (his app still can) while the engine cannot write there.
    await s.bob.write('n.txt', text('bob v2'));
    for (let i = 0; i < 10; i++) await engine.step();
    expect(await readText(s.alice, 'n.txt')).toBe('alice v2');
    s.fault.refuse = undefined;
    await engine.quiesce();
    const tree = await treeOf(s.alice, '');
    expect([...(await treeOf(s.bob, ''))]).toEqual([...tree]);
    const contents = await Promise.all([...tree.keys()].map((p) => readText(s.alice, p)));
    expect(contents.sort()).toEqual(['alice v2', 'bob v2']);
  });
});
