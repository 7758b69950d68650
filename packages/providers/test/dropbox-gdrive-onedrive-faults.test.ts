/**
 * Many small files through each emulator while it injects 429s (with Retry-After) and
 * connection resets — before the request is handled and after it was (the change happened,
 * the answer was lost). Every file must arrive intact exactly once. Faults are decided per
 * request from counters, so every run sees the same ones.
 *
 * 400 files by default; WEFT_FULL=1 runs the full 2,000.
 */
import { createHash } from 'node:crypto';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { DropboxEmulator } from '@weft/cloud-emulators/dropbox';
import type { EmulatorServer, FaultStats } from '@weft/cloud-emulators';
import { GDriveEmulator } from '@weft/cloud-emulators/gdrive';
import { OneDriveEmulator } from '@weft/cloud-emulators/onedrive';
import type { Tree, TreeNode } from '@weft/cloud-emulators';
import { DropboxProvider } from '../src/adapters/dropbox.ts';
import { GDriveProvider } from '../src/adapters/gdrive.ts';
import { OneDriveProvider } from '../src/adapters/onedrive.ts';
import type { Provider } from '../src/provider.ts';
import { wrapProvider } from '../src/wrappers/compose.ts';

const FILES = process.env.WEFT_FULL === '1' ? 2000 : 400;
const RETRY_AFTER_S = 1;

function files(): { path: string; data: Buffer }[] {
  return Array.from({ length: FILES }, (_, i) => ({
    path: `bulk/d${i % 20}/f${String(i).padStart(4, '0')}.txt`,
    data: Buffer.from(`file ${i} ` + 'x'.repeat(i % 97)),
  }));
}

function injectFaults(emu: EmulatorServer): void {
  // 10 % of requests fail: 6 % throttled, 3 % reset before handling, 1 % reset after.
  emu.faults.add({ rate: 0.06, action: { kind: 'status', status: 429, retryAfterSeconds: RETRY_AFTER_S } });
  emu.faults.add({ rate: 0.03, action: { kind: 'reset', when: 'before' } });
  emu.faults.add({ rate: 0.01, action: { kind: 'reset', when: 'after' } });
}

interface Outcome {
  delays: number[];
  stats: FaultStats;
}

async function upload(emu: EmulatorServer, provider: Provider): Promise<Outcome> {
  const delays: number[] = [];
  const wrapped = wrapProvider(provider, {
    concurrency: 16,
    // The recorded Retry-After waits are checked instead of slept: no timing in the test.
    retry: { maxAttempts: 12, sleep: async (ms) => void delays.push(ms), random: () => 0.5 },
  });
  injectFaults(emu);
  try {
    await Promise.all(files().map((f) => wrapped.write(f.path, f.data, { sha256: sha(f.data) })));
  } finally {
    emu.faults.clear();
  }
  return { delays, stats: emu.faults.stats() };
}

function sha(b: Uint8Array): string {
  return createHash('sha256').update(b).digest('hex');
}

/** Every file is at its path with its bytes, and nothing else (no duplicates) is there. */
function checkTree(tree: Pick<Tree, 'resolve' | 'children'>, base: string): void {
  for (const f of files()) {
    const node = tree.resolve(`${base}/${f.path}`);
    expect(node, f.path).toBeDefined();
    expect(node?.content.equals(f.data), f.path).toBe(true);
  }
  const bulk = tree.resolve(`${base}/bulk`) as TreeNode;
  const dirs = tree.children(bulk.id);
  expect(dirs).toHaveLength(20);
  const all = dirs.flatMap((d) => tree.children(d.id));
  expect(all).toHaveLength(FILES);
  expect(new Set(all.map((n) => n.name)).size).toBe(FILES);
}

function report(name: string, o: Outcome): void {
  const fired = Object.entries(o.stats.fired).reduce((s, [, n]) => s + n, 0);
  expect(fired).toBeGreaterThan(0);
  // Every wait the retry wrapper took for a 429 was the server's Retry-After.
  expect(o.delays.filter((d) => d === RETRY_AFTER_S * 1000).length).toBeGreaterThan(0);
  process.stderr.write(
    `${name}: ${FILES} files, ${o.stats.requests} requests, injected ${JSON.stringify(o.stats.fired)}\n`,
  );
}

describe(`${FILES} small files under injected 429s and resets`, () => {
  const started: EmulatorServer[] = [];
  afterAll(async () => {
    for (const e of started) await e.close();
  });

  it('dropbox: batched commits, each file exactly once', async () => {
    const emu = await new DropboxEmulator().start();
    started.push(emu);
    const p = new DropboxProvider({ token: emu.accessToken, root: '/faults', baseUrl: emu.url });
    const outcome = await upload(emu, p);
    checkTree(emu.tree, '/faults');
    expect(emu.maxBatchesInFlight).toBe(1);
    report('dropbox', outcome);
  }, 300_000);

  it('gdrive: no duplicate names after lost create responses', async () => {
    const emu = await new GDriveEmulator().start();
    started.push(emu);
    const p = new GDriveProvider({ token: emu.accessToken, root: 'faults', rootUrl: emu.url });
    const outcome = await upload(emu, p);
    checkTree(emu.tree, '/faults');
    report('gdrive', outcome);
  }, 300_000);

  it('onedrive: each file exactly once', async () => {
    const emu = await new OneDriveEmulator({ tls: inject('emulatorTls') }).start();
    started.push(emu);
    const p = new OneDriveProvider({ token: emu.accessToken, root: 'faults', graphOrigin: emu.apiOrigin });
    const outcome = await upload(emu, p);
    checkTree(emu.tree, '/faults');
    report('onedrive', outcome);
  }, 300_000);
});
