// The batch log's checkpoints sync the tier with syncfs through one helper shell started once
// (fs/tier-sync.ts, issue #16): before, each checkpoint forked the proxy for `sync -f` (~11 ms
// of the proxy's CPU per checkpoint at a few hundred MiB of heap). Counted, never timed.
import { execFile } from 'node:child_process';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { BatchLog } from '../src/adapters/fs/batch-log.ts';
import { TierSync } from '../src/adapters/fs/tier-sync.ts';

async function tempRoot(): Promise<string> {
  return fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-tier-sync-'));
}

describe('fs tier sync (syncfs helper)', () => {
  it('checkpoints many times with one helper started: no fork of the caller per checkpoint', async () => {
    const root = await tempRoot();
    const log = await BatchLog.open(nodePath.join(root, 'log'), root, 0o600, 0o700, async () => ({
      written: 0,
      abs: [],
    }));
    for (let i = 0; i < 5; i++) {
      const abs = nodePath.join(root, `f${i}`);
      const applied = await log.append([{ path: `f${i}`, bytes: Buffer.from(`x${i}`), abs, key: `f${i}` }]);
      await fsp.writeFile(abs, `x${i}`);
      applied();
      await log.checkpoint();
    }
    expect(log.stats).toMatchObject({ checkpoints: 5, syncfs: 5, syncfsStarts: 1 });
    await log.close();
  });

  it('answers false where sync -f fails (the caller falls back), and restarts a helper that died', async () => {
    const root = await tempRoot();
    const missing = new TierSync(nodePath.join(root, 'no-such-folder'));
    expect(await missing.sync()).toBe(false);
    missing.close();

    const t = new TierSync(root);
    expect(await t.sync()).toBe(true);
    const pid = t.pid!;
    const exited = new Promise<void>((resolve) => {
      const poll = setInterval(() => {
        if (t.pid === undefined) {
          clearInterval(poll);
          resolve();
        }
      }, 10);
    });
    process.kill(pid); // the helper this test started
    await exited;
    expect(await t.sync()).toBe(true);
    expect(t.stats).toEqual({ starts: 2, syncs: 2 });
    t.close();
  });

  it('keeps its caller alive while a sync is awaited and never after', async () => {
    const root = await tempRoot();
    const mod = nodePath.resolve(fileURLToPath(import.meta.url), '../../src/adapters/fs/tier-sync.ts');
    const script = nodePath.join(root, 'run.mts');
    // Never closed: the process must still end by itself once the sync answered.
    await fsp.writeFile(
      script,
      `import { TierSync } from ${JSON.stringify(mod)};\n` +
        `const t = new TierSync(${JSON.stringify(root)});\n` +
        `t.sync().then((ok) => console.log('synced', ok));\n`,
    );
    const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', script], {
      timeout: 60_000,
    });
    expect(stdout.trim()).toBe('synced true');
  });
});
