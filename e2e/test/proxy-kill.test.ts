/**
 * `kill -9` of the PROXY, again and again, while a `weft agent` process uploads large files:
 * the agent process never exits (a block upload rejected with nobody listening once ended
 * it, issue #14), logs no uncaught error, and once the proxy stays up the folder and the
 * store converge.
 *
 * 5 kills and 3 files of 10 MiB in the default run; 20 kills and 20 MiB files with
 * WEFT_FULL=1 (or WEFT_PROXY_KILLS=n).
 */
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { type FolderStatus, ProxyClient } from '@weft/core';
import { afterAll, describe, expect, it } from 'vitest';
import { agentStatus, localTree, prng, remoteTree, sorted, spawnAgent, tempDir } from '../src/harness.ts';
import { freePort, startProxyProcess } from '../src/proxy-process.ts';

const KILLS = Number(process.env.WEFT_PROXY_KILLS ?? (process.env.WEFT_FULL ? 20 : 5));
const MiB = 1024 * 1024;
// Several 4 MiB blocks a file; larger at full size.
const FILE_MIB = process.env.WEFT_FULL ? 20 : 10;

describe('proxy killed during large uploads', () => {
  let proxy: ChildProcess | undefined;
  let agent: ChildProcess | undefined;

  afterAll(() => {
    agent?.kill('SIGKILL');
    proxy?.kill('SIGKILL');
  });

  it(`the agent survives ${KILLS} kill -9 of the proxy and converges`, async () => {
    const base = await tempDir('proxy-kill');
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const adminToken = randomBytes(24).toString('hex');
    const config = nodePath.join(base, 'proxy.json');
    await fsp.writeFile(
      config,
      JSON.stringify({
        dataDir: nodePath.join(base, 'proxy'),
        port,
        host: '127.0.0.1',
        adminToken,
        logLevel: 'warn',
        objectTier: { type: 'fs' },
      }),
    );
    proxy = await startProxyProcess(config, url);
    const { token } = await ProxyClient.enrol(url, { user: 'alice', deviceName: 'uploader', adminToken });
    const folder = nodePath.join(base, 'Weft');
    const state = nodePath.join(base, 'state');
    await fsp.mkdir(folder, { recursive: true });
    for (let i = 0; i < 3; i++)
      await fsp.writeFile(nodePath.join(folder, `big${i}.bin`), randomBytes(FILE_MIB * MiB + i));
    agent = spawnAgent(folder, state, url, token, ['--device', 'uploader']);
    let stderr = '';
    agent.stderr?.on('data', (c: Buffer) => (stderr = (stderr + c.toString()).slice(-20_000)));
    let exited: number | null | undefined;
    agent.once('exit', (code) => (exited = code));
    for (let i = 0; i < 400 && !(await agentStatus(state)); i++) await new Promise((r) => setTimeout(r, 50));

    const rnd = prng(14);
    let midUpload = 0;
    const busy = (s: FolderStatus | undefined): boolean =>
      !!s && ((s.transfers?.length ?? 0) > 0 || s.pendingOperations > 0 || s.state === 'syncing');
    for (let k = 0; k < KILLS; k++) {
      // A person keeps working: a new large file arrives, so there is an upload to break.
      // (Appending to an existing file would travel as a small delta, over before the kill.)
      await fsp.writeFile(nodePath.join(folder, `new${k}.bin`), randomBytes(FILE_MIB * MiB + k));
      // Aim the kill at work in progress: poll (up to 15 s) until the agent reports the
      // upload, then kill after a short random delay so kills land at different points.
      let s = await agentStatus(state);
      for (let w = 0; w < 750 && !busy(s); w++) {
        await new Promise((r) => setTimeout(r, 20));
        s = await agentStatus(state);
      }
      await new Promise((r) => setTimeout(r, Math.floor(rnd() * 200)));
      if (busy(await agentStatus(state))) midUpload += 1;
      proxy.kill('SIGKILL');
      await new Promise((r) => proxy?.once('exit', r));
      await new Promise((r) => setTimeout(r, 300 + Math.floor(rnd() * 700)));
      expect(exited, `the agent exited after kill ${k + 1}: ${stderr.slice(-3000)}`).toBeUndefined();
      proxy = await startProxyProcess(config, url);
    }

    const client = new ProxyClient({ baseUrl: url, token });
    const local = await localTree(folder);
    let converged = false;
    for (let i = 0; i < 600 && !converged && exited === undefined; i++) {
      await new Promise((r) => setTimeout(r, 500));
      const s = await agentStatus(state);
      if (s && s.state === 'idle' && s.pendingOperations === 0)
        converged = JSON.stringify(sorted(await remoteTree(client))) === JSON.stringify(sorted(local));
    }
    expect(exited, `the agent exited: ${stderr.slice(-3000)}`).toBeUndefined();
    expect(sorted(await remoteTree(client))).toEqual(sorted(local));
    // Nothing reached the process guard: every failure had a handler.
    expect(stderr).not.toMatch(/unhandled promise rejection|uncaught exception/);
    agent.kill('SIGTERM');
    await new Promise((r) => agent?.once('exit', r));
    process.stdout.write(
      `proxy kill test: ${KILLS} kills, ${midUpload} while the agent had work in progress\n`,
    );
    // The test means something only if kills landed during uploads: each kill waits for a
    // fresh large upload to be under way, so most do (all but a kill whose upload finished
    // in the random delay before it).
    expect(midUpload).toBeGreaterThanOrEqual(Math.ceil(KILLS / 2));
  });
});
