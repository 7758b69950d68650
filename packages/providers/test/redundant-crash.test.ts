/**
 * kill -9 of a process using the redundant tier (issue #17) while it encodes, writes,
 * deletes, logs writes for a down backend and replays the log. After each kill the tier
 * is reopened on the same directories: every file acknowledged reads back as written (or
 * as a change begun later, which may have committed), a file whose delete was
 * acknowledged is gone (or rewritten later), and the scrub finds nothing referenced but
 * missing or corrupt. Then the orphan sweep deletes what the kill left unreferenced (blobs
 * stored by a write whose commit never happened): afterwards each backend holds exactly the
 * blobs the placement store refers to. CI: 2 rounds; WEFT_FULL=1: 20.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { collect } from '../src/body.ts';
import { FsProvider } from '../src/adapters/fs.ts';
import { NotFoundError } from '../src/errors.ts';
import {
  BLOB_DIR,
  blobKey,
  openRedundantProvider,
  parseBlobKey,
  scrub,
  sweepOrphans,
} from '../src/redundant/index.ts';

const CHILD = nodePath.resolve(fileURLToPath(import.meta.url), '../fixtures/redundant-child.ts');
const ROUNDS = process.env.WEFT_FULL === '1' ? 20 : 2;

/**
 * Run the child until it acknowledged `acks` changes, then `lagMs` later kill -9 it (a write
 * takes the child ≥ 100 ms, so the lag spreads the kills over a write: encoding, some blobs
 * stored, committing); its stdout lines.
 */
async function runAndKill(args: string[], seed: number, acks: number, lagMs: number): Promise<string[]> {
  const child = spawn(process.execPath, ['--import', 'tsx', CHILD, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, SEED: String(seed) },
  });
  let out = '';
  let err = '';
  child.stderr.on('data', (b: Buffer) => (err += b.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (b: Buffer) => {
      out += b.toString();
      if ((out.match(/^ACK /gm) ?? []).length >= acks) resolve();
    });
    child.once('exit', (code) => reject(new Error(`child exited (${code}): ${err}`)));
  });
  await new Promise((r) => setTimeout(r, lagMs));
  child.kill('SIGKILL');
  await exited;
  return out.split('\n').filter((l) => l !== '');
}

describe('redundant tier and kill -9', () => {
  it('loses nothing acknowledged and leaves nothing referenced but missing', async () => {
    const dir = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-redundant-crash-'));
    const roots = [0, 1, 2, 3, 4].map((i) => nodePath.join(dir, `backend${i}`));
    for (const r of roots) await fsp.mkdir(r);
    const tierDir = nodePath.join(dir, 'tier');
    // Per path: the content acknowledged last ('-' deleted), and what was begun after it.
    const acked = new Map<string, string>();
    const pending = new Map<string, string[]>();
    for (let round = 0; round < ROUNDS; round++) {
      const lines = await runAndKill(
        [tierDir, ...roots],
        round + 1,
        20 + ((round * 7) % 25),
        40 + ((round * 53) % 110),
      );
      for (const line of lines) {
        const [kind, path, sha] = line.split(' ') as [string, string, string?];
        if (kind === 'BEGIN') pending.set(path, [...(pending.get(path) ?? []), sha!]);
        if (kind === 'ACK') {
          acked.set(path, pending.get(path)!.at(-1)!);
          pending.set(path, []);
        }
      }
      const backends = await Promise.all(roots.map((root) => FsProvider.open({ root })));
      const tier = openRedundantProvider({
        backends: backends.map((provider, i) => ({ id: `b${i}`, provider })),
        dir: tierDir,
        thresholdBytes: 64 * 1024,
        maxShardBytes: 32 * 1024,
        probeIntervalMs: 0,
      });
      try {
        await tier.probe();
        expect(await tier.store.logCount()).toBe(0);
        for (const [path, sha] of acked) {
          const allowed = new Set([sha, ...(pending.get(path) ?? [])]);
          let now = '-';
          try {
            now = createHash('sha256')
              .update(await collect(await tier.read(path)))
              .digest('hex');
          } catch (e) {
            if (!(e instanceof NotFoundError)) throw e;
          }
          expect(allowed.has(now), `${path} in round ${round}`).toBe(true);
        }
        const report = await scrub(tier, { repair: false });
        expect(report).toMatchObject({ missing: 0, corrupt: 0, skipped: 0 });
        const swept = await sweepOrphans(tier, { graceMs: 0 });
        expect(swept).toMatchObject({ backends: 5, skipped: [], young: 0 });
        for (let b = 0; b < 5; b++) {
          const want: string[] = [];
          for (const id of await tier.store.objectIds(`b${b}`)) {
            const o = (await tier.store.object(id))!;
            for (const l of await tier.store.locations(id))
              if (l.backend === `b${b}`) want.push(blobKey(o, l.slot));
          }
          const have: string[] = [];
          for await (const e of backends[b]!.list(BLOB_DIR, { recursive: true }))
            if (e.kind === 'file' && parseBlobKey(e.path)) have.push(e.path);
          expect(have.sort(), `backend b${b} in round ${round}`).toEqual(want.sort());
        }
        // The reopened tier's state is the next round's base.
        for (const path of acked.keys()) {
          const e = await tier.stat(path).catch(() => undefined);
          const sha = e?.hash?.value ?? '-';
          acked.set(path, sha);
          pending.set(path, []);
        }
      } finally {
        await tier.close();
      }
    }
    await fsp.rm(dir, { recursive: true, force: true });
  }, 300_000);
});
