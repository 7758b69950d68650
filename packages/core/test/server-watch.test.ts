/**
 * The agent's watch over the proxy instances (remote/server-watch.ts): each round asks every
 * instance whose backoff allows it for the list, times it, learns the current one's list,
 * treats a refusal as an answer and a failure or a timeout as the instance away, and keeps
 * the pool in servers.json for the next start.
 */
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { OfflineError, RemoteError } from '../src/remote/http-errors.ts';
import { ServerPool, type ServerInstance } from '../src/remote/server-pool.ts';
import { SERVERS_FILE, ServerWatch, loadServerPool } from '../src/remote/server-watch.ts';

const A = 'http://a.test:1';
const B = 'http://b.test:2';
const C = 'http://c.test:3';

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await fsp.rm(d, { recursive: true, force: true });
});

describe('ServerWatch', () => {
  it('learnsTheListProbesEachInstanceAndSavesThePool', async () => {
    const stateDir = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-server-watch-'));
    dirs.push(stateDir);
    const pool = new ServerPool({ home: A, downBackoff: { baseMs: 60_000, capMs: 60_000 } });
    const asked: string[] = [];
    const lists: Record<string, ServerInstance[]> = {
      [A]: [
        { url: A, id: 'a', state: 'active' },
        { url: B, id: 'b', state: 'active' },
      ],
      // Another instance's view does not override the current one's.
      [B]: [{ url: B, id: 'b', state: 'active' }],
    };
    let behaviour: (url: string, signal: AbortSignal) => Promise<ServerInstance[] | undefined> = async (
      url,
    ) => lists[url];
    const watch = new ServerWatch({
      pool,
      stateDir,
      probeTimeoutMs: 100,
      ask: (url, signal) => {
        asked.push(url);
        return behaviour(url, signal);
      },
    });
    await watch.round(); // only A known: asked, and its list learnt
    expect(asked).toEqual([A]);
    await watch.round(); // now both
    expect(asked).toEqual([A, A, B]);
    expect(pool.view().map((v) => [v.url, v.id, v.up, typeof v.rttMs])).toEqual([
      [A, 'a', true, 'number'],
      [B, 'b', true, 'number'],
    ]);
    const saved = JSON.parse(await fsp.readFile(nodePath.join(stateDir, SERVERS_FILE), 'utf8')) as unknown;
    expect(saved).toMatchObject({ home: A, current: A, instances: [{ url: A }, { url: B }] });
    expect((await fsp.stat(nodePath.join(stateDir, SERVERS_FILE))).mode & 0o777).toBe(0o600);

    // A refuses the token (still there), B hangs past the timeout (away), C is unknown.
    behaviour = (url, signal) =>
      url === A
        ? Promise.reject(new RemoteError(401, 'UNAUTHORIZED', 'revoked'))
        : new Promise((_, reject) =>
            signal.addEventListener('abort', () => reject(new OfflineError('timed out'))),
          );
    asked.length = 0;
    await watch.round();
    expect(asked).toEqual([A, B]);
    // One probe past its timeout is a slow answer, not yet a hung instance; two in a row are.
    expect(pool.view().map((v) => v.up)).toEqual([true, true]);
    asked.length = 0;
    await watch.round();
    expect(asked).toEqual([A, B]);
    expect(pool.view().map((v) => v.up)).toEqual([true, false]);
    asked.length = 0;
    await watch.round(); // B is left alone during its backoff
    expect(asked).toEqual([A]);
    await watch.stop();

    // The next start finds both, for this enrolment only.
    const again = await loadServerPool(stateDir, { home: A });
    expect(again.view().map((v) => v.url)).toEqual([A, B]);
    expect((await loadServerPool(stateDir, { home: C })).view().map((v) => v.url)).toEqual([C]);
  });

  it('keepsRequestsInFlightThroughOneSlowProbeOfTheOnlyInstance', async () => {
    // CI under load: one probe of a busy proxy took longer than its timeout; the pool took the
    // only instance for down and abandoned the upload under way, and the agent said Offline.
    const pool = new ServerPool({ home: A, downBackoff: { baseMs: 60_000, capMs: 60_000 } });
    const abandoned: string[] = [];
    pool.onDown((url) => abandoned.push(url));
    let slow = true;
    const watch = new ServerWatch({
      pool,
      probeTimeoutMs: 20,
      ask: (_url, signal) =>
        slow
          ? new Promise((_, reject) =>
              signal.addEventListener('abort', () => reject(new OfflineError('timed out'))),
            )
          : Promise.resolve(undefined),
    });
    await watch.round();
    expect(abandoned).toEqual([]);
    expect(pool.view()[0]?.up).toBe(true);
    // It answers again: the strike is forgotten; a later single slow probe is again only slow.
    slow = false;
    await watch.round();
    slow = true;
    await watch.round();
    expect(abandoned).toEqual([]);
    // Hung for two probes in a row: down, and what waited on it is abandoned.
    await watch.round();
    expect(abandoned).toEqual([A]);
    expect(pool.view()[0]?.up).toBe(false);
    watch.dispose();
  });

  it('movesOffTheCurrentInstanceWhenItsProbeFails', async () => {
    const pool = new ServerPool({ home: A, downBackoff: { baseMs: 60_000, capMs: 60_000 } });
    pool.learn([{ url: A }, { url: B }]);
    let aUp = true;
    const watch = new ServerWatch({
      pool,
      ask: async (url) => {
        if (url === A && !aUp) throw new OfflineError('refused');
        return undefined; // an older server: no list, but it answered
      },
    });
    await watch.round();
    expect(pool.current).toBe(A);
    aUp = false;
    await watch.round();
    expect(pool.current).toBe(B);
    expect(pool.failovers).toBe(1);
    watch.dispose();
  });
});
