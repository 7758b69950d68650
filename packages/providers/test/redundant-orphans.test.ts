/**
 * The redundant tier's orphan sweep (issue #17) over directory backends: blobs stored by a
 * write whose commit never happened (planted exactly as such a write leaves them: under an
 * object id the placement store does not know), and a blob on a backend that does not hold
 * that slot, are deleted; referenced blobs, young orphans (grace period), blobs of a write
 * still in flight and blobs on a down backend are not. kill -9 leftovers:
 * redundant-crash.test.ts.
 */
import { randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { collect } from '../src/body.ts';
import { FsProvider } from '../src/adapters/fs.ts';
import type { Provider } from '../src/provider.ts';
import {
  BLOB_DIR,
  blobKey,
  openRedundantProvider,
  parseBlobKey,
  scrub,
  sweepOrphans,
  type RedundantProvider,
} from '../src/redundant/index.ts';
import { OutageProvider } from '../src/testing/outage.ts';
import { type CallInfo, ForwardingProvider } from '../src/wrappers/forwarding.ts';

const KiB = 1024;
const open: RedundantProvider[] = [];
afterEach(async () => {
  for (const t of open.splice(0)) await t.close().catch(() => undefined);
});

/** Holds writes until released (a write in flight). */
class GatedProvider extends ForwardingProvider {
  private gate: Promise<void> | undefined;
  private release: (() => void) | undefined;
  entered = 0;
  hold(): void {
    this.gate = new Promise((r) => (this.release = r));
  }
  open(): void {
    this.release?.();
    this.gate = undefined;
  }
  protected async call<T>(info: CallInfo, fn: () => Promise<T>): Promise<T> {
    if (info.op === 'write' && this.gate) {
      this.entered += 1;
      await this.gate;
    }
    return fn();
  }
}

async function rig() {
  const dir = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-redundant-orphans-'));
  const roots = [0, 1, 2, 3, 4].map((i) => nodePath.join(dir, `backend${i}`));
  for (const r of roots) await fsp.mkdir(r);
  const raw = await Promise.all(roots.map((root) => FsProvider.open({ root })));
  const outage = raw.map((p) => new OutageProvider(p));
  const gated = outage.map((p) => new GatedProvider(p));
  const tier = openRedundantProvider({
    backends: gated.map((provider, i) => ({ id: `b${i}`, provider })),
    dir: nodePath.join(dir, 'tier'),
    thresholdBytes: 64 * KiB,
    maxShardBytes: 32 * KiB,
    probeIntervalMs: 0,
  });
  open.push(tier);
  return { tier, raw, outage, gated };
}

/** Blob keys on a backend. */
async function blobs(p: Provider): Promise<string[]> {
  const out: string[] = [];
  try {
    for await (const e of p.list(BLOB_DIR, { recursive: true }))
      if (e.kind === 'file' && parseBlobKey(e.path)) out.push(e.path);
  } catch {
    /* no blob folder yet */
  }
  return out.sort();
}

/** Blob keys the placement store refers to on each backend. */
async function referenced(tier: RedundantProvider): Promise<string[][]> {
  const per: string[][] = [[], [], [], [], []];
  for (const id of await tier.store.objectIds()) {
    const o = (await tier.store.object(id))!;
    for (const l of await tier.store.locations(id)) per[Number(l.backend.slice(1))]!.push(blobKey(o, l.slot));
  }
  return per.map((l) => l.sort());
}

describe('redundant tier, orphan sweep', () => {
  it('deletes blobs no location refers to, and only those', async () => {
    const { tier, raw } = await rig();
    const files = new Map<string, Buffer>([
      ['big', randomBytes(200 * KiB + 3)],
      ['small', randomBytes(3000)],
    ]);
    for (const [p, d] of files) await tier.write(p, d);
    const before = await referenced(tier);
    // What a write killed between its uploads and its commit leaves: a replicated object's
    // two replicas and a striped object's five fragments, under ids nothing records.
    const lostR = randomBytes(16).toString('hex');
    const lostF = randomBytes(16).toString('hex');
    for (const slot of [0, 1])
      await raw[slot + 2]!.write(blobKey({ id: lostR, layout: 'replicated' }, slot), randomBytes(900));
    for (let slot = 0; slot < 5; slot++)
      await raw[slot]!.write(blobKey({ id: lostF, layout: 'striped' }, slot), randomBytes(4000));
    // A recorded object's fragment 0 on a backend that holds another slot of it.
    const big = (await tier.store.object((await tier.store.objectOf('big'))!))!;
    const holder0 = (await tier.store.locations(big.id)).find((l) => l.slot === 0)!.backend;
    const elsewhere = [0, 1, 2, 3, 4].find((i) => `b${i}` !== holder0)!;
    await raw[elsewhere]!.write(blobKey(big, 0), randomBytes(100));

    // Young: kept under the default grace period.
    const young = await sweepOrphans(tier);
    expect(young).toMatchObject({ backends: 5, orphans: 0, removed: 0, young: 8 });
    // A dry run counts and deletes nothing.
    const dry = await sweepOrphans(tier, { graceMs: 0, dryRun: true });
    expect(dry).toMatchObject({ orphans: 8, removed: 0 });
    expect((await blobs(raw[0]!)).length).toBeGreaterThan(before[0]!.length);

    const report = await sweepOrphans(tier, { graceMs: 0 });
    expect(report).toMatchObject({ backends: 5, skipped: [], orphans: 8, removed: 8, young: 0 });
    expect(report.bytes).toBe(2 * 900 + 5 * 4000 + 100);
    for (let i = 0; i < 5; i++) expect(await blobs(raw[i]!)).toEqual(before[i]);
    for (const [p, d] of files) expect((await collect(await tier.read(p))).equals(d)).toBe(true);
    expect(await scrub(tier, { repair: false })).toMatchObject({ missing: 0, corrupt: 0 });
    expect(await sweepOrphans(tier, { graceMs: 0 })).toMatchObject({ orphans: 0 });
  });

  it('leaves a write in flight and a down backend alone', async () => {
    const { tier, raw, outage, gated } = await rig();
    await tier.write('kept', randomBytes(100 * KiB));
    // A striped write whose fragment 4 upload is held: four fragments are on disk, uncommitted.
    gated[4]!.hold();
    const data = randomBytes(150 * KiB);
    const writing = tier.write('inflight', data);
    await expect.poll(() => gated[4]!.entered).toBe(1);
    const leftOver = randomBytes(16).toString('hex');
    await raw[1]!.write(blobKey({ id: leftOver, layout: 'replicated' }, 0), randomBytes(10));
    await raw[4]!.write(blobKey({ id: leftOver, layout: 'replicated' }, 1), randomBytes(10));
    outage[4]!.goDown();
    tier.markDown('b4');
    const report = await sweepOrphans(tier, { graceMs: 0 });
    expect(report).toMatchObject({ backends: 4, skipped: ['b4'], orphans: 1, removed: 1 });
    expect(await blobs(raw[4]!)).toContain(blobKey({ id: leftOver, layout: 'replicated' }, 1));
    outage[4]!.restore();
    gated[4]!.open();
    await writing;
    expect((await collect(await tier.read('inflight'))).equals(data)).toBe(true);
    await tier.probe();
    const after = await sweepOrphans(tier, { graceMs: 0 });
    expect(after).toMatchObject({ backends: 5, orphans: 1, removed: 1 });
    expect(await scrub(tier, { repair: false })).toMatchObject({ missing: 0, corrupt: 0 });
  });

  it('parses only blob keys', () => {
    const id = 'ab'.padEnd(32, '0');
    expect(parseBlobKey(`${BLOB_DIR}/ab/${id}.f3`)).toEqual({ id, layout: 'striped', slot: 3 });
    expect(parseBlobKey(`${BLOB_DIR}/ab/${id}.r0`)).toEqual({ id, layout: 'replicated', slot: 0 });
    expect(parseBlobKey(`${BLOB_DIR}/probe`)).toBeUndefined();
    expect(parseBlobKey(`${BLOB_DIR}/cd/${id}.f3`)).toBeUndefined();
    expect(parseBlobKey(`${BLOB_DIR}/ab/${id}.x3`)).toBeUndefined();
    expect(parseBlobKey(`elsewhere/ab/${id}.f3`)).toBeUndefined();
  });
});
