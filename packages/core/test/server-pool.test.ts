/**
 * The agent's choice of proxy instance (remote/server-pool.ts): nearest by round trip,
 * failover at once on a refused connection and after sustained 502/503, all down → Weft's
 * backoff, moving back to the nearest only with hysteresis, and the saved list.
 */
import { describe, expect, it } from 'vitest';
import { ServerPool, type ServerPoolOptions } from '../src/remote/server-pool.ts';

const A = 'http://a.example:1';
const B = 'http://b.example:2';
const C = 'http://c.example:3';

function pool(extra: Partial<ServerPoolOptions> = {}) {
  let t = 1_000_000;
  const clock = {
    now: () => t,
    advance: (ms: number) => {
      t += ms;
    },
  };
  const p = new ServerPool({
    home: A,
    now: clock.now,
    downBackoff: { baseMs: 1_000, capMs: 8_000, jitter: 'none' },
    minDwellMs: 30_000,
    ...extra,
  });
  p.learn([
    { url: A, id: 'a', state: 'active' },
    { url: B, id: 'b', state: 'active' },
    { url: C, id: 'c', state: 'active' },
  ]);
  return { p, clock };
}

/** Enough answered probes with these round trips for the hysteresis to allow a move. */
function probe(p: ServerPool, rtts: Record<string, number>, rounds = 3): void {
  for (let i = 0; i < rounds; i++) for (const [url, ms] of Object.entries(rtts)) p.answered(url, ms);
}

describe('ServerPool', () => {
  it('startsOnTheEnrolmentServerAndFailsOverToTheNearestThatAnswers', () => {
    const { p } = pool();
    expect(p.current).toBe(A);
    probe(p, { [A]: 5, [B]: 40, [C]: 12 });
    expect(p.reconsider()).toBe(false); // A is the nearest already
    const r = p.failed(A, 'unreachable');
    expect(r).toEqual({ current: C, moved: true }); // C (12 ms) before B (40 ms)
    expect(p.failovers).toBe(1);
    expect(p.currentId()).toBe('c');
  });

  it('unknownRoundTripsRankAfterMeasuredOnesAndTheListOrderBreaksTies', () => {
    const { p } = pool();
    p.answered(C, 30);
    expect(p.failed(A, 'unreachable').current).toBe(C);
    const { p: q } = pool();
    expect(q.failed(A, 'unreachable').current).toBe(B); // nothing measured: listing order
  });

  it('amongSimilarRoundTripsTheMostAvailableBandwidthWins', () => {
    const D = 'http://d.example:4';
    const { p } = pool();
    p.learn([
      { url: A, availableBps: 0 },
      { url: B, availableBps: 1_000_000 },
      { url: C, availableBps: 50_000_000 },
      { url: D, availableBps: 900_000_000 },
    ]);
    probe(p, { [A]: 10, [B]: 10, [C]: 11, [D]: 30 }, 1);
    // B and C are within one 25 % band: C has the bandwidth; D is farther whatever it has.
    expect(p.failed(A, 'unreachable').current).toBe(C);
    expect(p.failed(C, 'unreachable').current).toBe(B);
    // Under 5 ms every round trip is alike.
    const { p: q } = pool();
    q.learn([
      { url: B, availableBps: 10 },
      { url: C, availableBps: 20 },
    ]);
    probe(q, { [A]: 1, [B]: 0.5, [C]: 4.5 }, 1);
    expect(q.failed(A, 'unreachable').current).toBe(C);
  });

  it('a502Or503MovesOnlyWhenSustained', () => {
    const { p } = pool();
    expect(p.failed(A, 'unavailable')).toEqual({ current: A, moved: false });
    p.answered(A); // an answer in between: the count starts again
    expect(p.failed(A, 'unavailable').moved).toBe(false);
    expect(p.failed(A, 'unavailable')).toEqual({ current: B, moved: true });
  });

  it('allDownWaitsOnTheSharedBackoffAndAnAnswerResetsIt', () => {
    const { p, clock } = pool();
    p.failed(A, 'unreachable');
    p.failed(B, 'unreachable');
    expect(p.failed(C, 'unreachable').moved).toBe(false);
    // Everyone waits base·2^(n-1): 1 s each after one failure; A's wait ends first.
    expect(p.current).toBe(A);
    expect(p.retryInMs()).toBe(1_000);
    expect(p.due(A)).toBe(false);
    clock.advance(1_000);
    expect(p.due(A)).toBe(true);
    // A fails again: 2 s, then 4 s, 8 s and the cap.
    const waits: number[] = [];
    for (let i = 0; i < 5; i++) {
      clock.advance(10_000);
      p.failed(A, 'unreachable');
      p.failed(B, 'unreachable');
      p.failed(C, 'unreachable');
      waits.push(p.retryInMs());
    }
    expect(waits).toEqual([2_000, 4_000, 8_000, 8_000, 8_000]);
    p.answered(B, 10);
    expect(p.retryInMs()).toBe(0);
    expect(p.reconsider()).toBe(true);
    expect(p.current).toBe(B);
    p.failed(B, 'unreachable');
    clock.advance(1_000); // B's backoff was reset by the answer: back to the first delay
    expect(p.due(B)).toBe(true);
  });

  it('movesBackToTheNearestOnlyAfterSteadyAnswersDwellTimeAndAClearGain', () => {
    const { p, clock } = pool();
    probe(p, { [A]: 5, [B]: 20, [C]: 50 });
    p.failed(A, 'unreachable');
    expect(p.current).toBe(B);
    clock.advance(1_000);
    // A answers again, but once: not yet.
    p.answered(A, 5);
    expect(p.reconsider()).toBe(false);
    p.answered(A, 5);
    p.answered(A, 5);
    expect(p.reconsider()).toBe(false); // 1 s on B: under the dwell time
    clock.advance(30_000);
    // A flaps: its run of answers starts again.
    p.failed(A, 'unreachable');
    clock.advance(1_000);
    p.answered(A, 5);
    expect(p.reconsider()).toBe(false);
    probe(p, { [A]: 5 });
    expect(p.reconsider()).toBe(true);
    expect(p.current).toBe(A);
    expect(p.returns).toBe(1);
  });

  it('aSimilarRoundTripIsNoReasonToMove', () => {
    const { p, clock } = pool();
    probe(p, { [A]: 10, [B]: 9 });
    clock.advance(60_000);
    expect(p.reconsider()).toBe(false); // 9 ms is not ≤ 75 % of 10 ms
    probe(p, { [B]: 1 }, 10);
    expect(p.reconsider()).toBe(true);
    expect(p.current).toBe(B);
  });

  it('leavesADrainingOrUnlistedInstanceForOneThatAnswers', () => {
    const { p } = pool();
    probe(p, { [B]: 50 });
    p.learn([
      { url: A, state: 'draining' },
      { url: B, state: 'active' },
    ]);
    expect(p.reconsider()).toBe(true); // no dwell time or gain needed to leave a draining one
    expect(p.current).toBe(B);
    expect(p.view().map((v) => v.url)).toEqual([A, B]); // C no longer listed; A is home
    p.learn([{ url: C, state: 'active' }]);
    expect(p.view().find((v) => v.url === B)?.state).toBe('draining');
  });

  it('aFailureSeenOnAnOldInstanceSendsTheRequestToTheCurrentOne', () => {
    const { p } = pool();
    p.failed(A, 'unreachable');
    expect(p.current).toBe(B);
    // A request that had started on A before the move fails now.
    expect(p.failed(A, 'unreachable')).toEqual({ current: B, moved: true });
  });

  it('isSavedAndRestoredForTheSameEnrolmentOnly', () => {
    const { p } = pool();
    probe(p, { [A]: 5, [B]: 7 }, 1);
    p.failed(A, 'unreachable');
    const saved = JSON.parse(JSON.stringify(p.snapshot())) as unknown;
    const again = ServerPool.restore(saved, { home: `${A}/` });
    expect(again.current).toBe(B);
    expect(again.view().map((v) => [v.url, v.rttMs])).toEqual([
      [A, 5],
      [B, 7],
      [C, undefined],
    ]);
    const other = ServerPool.restore(saved, { home: 'http://elsewhere:9' });
    expect(other.view().map((v) => v.url)).toEqual(['http://elsewhere:9']);
    // Garbage is ignored, not trusted.
    expect(
      ServerPool.restore(
        { home: A, current: 'x', instances: [{ url: 'file:///etc' }, 3] },
        { home: A },
      ).view(),
    ).toHaveLength(1);
  });

  it('steersOnlyToAnInstanceItListsAndFindsUp', () => {
    const { p, clock } = pool();
    expect(p.steerable(`${B}/`)).toBe(B); // listed, up, not the current one
    expect(p.steerable(A)).toBeUndefined(); // the current one: nothing to steer
    expect(p.steerable('http://stranger.example:4')).toBeUndefined(); // named by an answer alone
    expect(p.steerable('file:///etc/passwd')).toBeUndefined();
    expect(p.steerable(undefined)).toBeUndefined();
    p.failed(C, 'unreachable');
    expect(p.steerable(C)).toBeUndefined(); // down: not until its backoff has passed
    clock.advance(1_000);
    expect(p.steerable(C)).toBe(C);
  });

  it('neverMovesFromHttpsToPlainHttp', () => {
    // A proxy behind a TLS-terminating load balancer, with no publicUrl, lists its own listen
    // URL: an agent that enrolled over https must not take its token there in the clear.
    const home = 'https://weft.example.com';
    const inside = 'http://10.0.0.5:8080';
    const other = 'https://b.weft.example.com';
    const p = new ServerPool({ home, downBackoff: { baseMs: 1_000, capMs: 8_000, jitter: 'none' } });
    p.learn([
      { url: inside, id: 'x', state: 'active', availableBps: 1e9 },
      { url: other, id: 'b', state: 'active' },
    ]);
    expect(p.snapshot().instances.map((i) => i.url)).toEqual([home, other]);
    for (let i = 0; i < 3; i++) p.answered(inside, 1);
    expect(p.steerable(inside)).toBeUndefined();
    expect(p.failed(home, 'unreachable')).toEqual({ current: other, moved: true });
    // Nor from a saved list (servers.json is the agent's own file, but an older one may hold it).
    const again = ServerPool.restore(
      { home, current: inside, instances: [{ url: home }, { url: inside }, { url: other }] },
      { home },
    );
    expect(again.snapshot().instances.map((i) => i.url)).toEqual([home, other]);
    expect(again.current).toBe(home);
    // Plain http among plain http stays as it was (a LAN or loopback deployment).
    const { p: plain } = pool();
    expect(plain.snapshot().instances.map((i) => i.url)).toEqual([A, B, C]);
  });

  it('neverTakesItsTokenToThisMachineUnlessItEnrolledHere', () => {
    // A proxy listening on 0.0.0.0 with no publicUrl lists http://127.0.0.1:PORT: on the
    // agent's machine that is whatever listens on that port there.
    const home = 'http://nas.local:8080';
    const lan = 'http://10.0.0.7:8080';
    const p = new ServerPool({ home });
    p.learn([
      { url: 'http://127.0.0.1:8080', state: 'active', availableBps: 1e9 },
      { url: 'http://127.1.2.3:8080', state: 'active' },
      { url: 'http://0x7f000001:8081', state: 'active' },
      { url: 'http://localhost:8080', state: 'active' },
      { url: 'http://app.localhost:8080', state: 'active' },
      { url: 'http://0.0.0.0:8080', state: 'active' },
      { url: 'http://[::1]:8080', state: 'active' },
      { url: 'http://[::]:8080', state: 'active' },
      { url: 'http://[::ffff:127.0.0.1]:8080', state: 'active' },
      { url: lan, state: 'active' },
    ]);
    expect(p.snapshot().instances.map((i) => i.url)).toEqual([home, lan]);
    expect(p.steerable('http://127.0.0.1:8080')).toBeUndefined();
    // Enrolled on this machine (npm start, the tests' clusters): its other local instances stand.
    const local = new ServerPool({ home: 'http://127.0.0.1:9000' });
    local.learn([{ url: 'http://127.0.0.1:9000' }, { url: 'http://127.0.0.1:9001' }]);
    expect(local.snapshot().instances.map((i) => i.url)).toEqual([
      'http://127.0.0.1:9000',
      'http://127.0.0.1:9001',
    ]);
  });
});
