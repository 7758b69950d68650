/**
 * The packer keeps up with ingest (issue #16): bundles arriving faster than packs are written
 * wait for room in the packer's bounded memory (back-pressure on the bundle ingest) instead
 * of overflowing it — what overflowed used to be read back from the filesystem tier, one file
 * at a time, and at 100,000 files that read-back was most of a 33 s tail after the agent was
 * idle. A pack is written while the next one fills (one write in flight), and a pack write
 * that fails mid-stream loses nothing: its files stay pending and the next flush packs them.
 * Counted (reads of the filesystem tier, packs, pending files), never timed.
 */
import { afterAll, describe, expect, it, vi } from 'vitest';
import { pseudoRandom, sha, startTestServer, tempDir, TestClient } from './helpers.ts';

type Server = Awaited<ReturnType<typeof startTestServer>>;
const started: Server[] = [];
afterAll(async () => {
  for (const s of started) await s.close().catch(() => undefined);
});

const files = (prefix: string, n: number, seed: number): Record<string, Buffer> =>
  Object.fromEntries(
    Array.from({ length: n }, (_, i) => [`${prefix}/f${i}.bin`, pseudoRandom(2000 + i, seed + i)]),
  );

/** 64 KiB packs (the packer holds 128 KiB of received bytes); flushed at the target only. */
async function setup(): Promise<{ server: Server; alice: TestClient }> {
  const server = await startTestServer({
    dataDir: await tempDir(),
    packs: { targetBytes: 64 * 1024, timeoutMs: 2_000_000_000, idleMs: 0, gcIntervalMs: 0 },
  });
  started.push(server);
  return { server, alice: await TestClient.enrol(server, 'alice') };
}

describe('packer following ingest', () => {
  it('packs bundles that arrive faster than packs are written without reading any file back', async () => {
    const { server, alice } = await setup();
    const packer = server.packer!;
    const readSmall = vi.spyOn(packer['o'], 'readSmall');
    // A slow object tier: each pack write takes 150 ms more.
    const objects = packer['o'].objects;
    const write = objects.write.bind(objects);
    let writing = 0;
    let mostWriting = 0;
    vi.spyOn(objects, 'write').mockImplementation(async (...args) => {
      mostWriting = Math.max(mostWriting, ++writing);
      await new Promise((r) => setTimeout(r, 150));
      try {
        return await write(...args);
      } finally {
        writing--;
      }
    });
    // 12 bundles of 20 files (~40 KiB each, ~480 KiB in all, 3.75× what the packer holds) at once.
    const sent = Array.from({ length: 12 }, (_, b) => files(`b${b}`, 20, 1000 * b));
    const answers = await Promise.all(sent.map((f) => alice.putSmall(f)));
    for (const a of answers) for (const { result } of a) expect(result.status).toBe('applied');
    expect(packer['hot'].size).toBeLessThanOrEqual(2 * packer.targetBytes);
    await packer.flush();
    expect(await packer.pendingCount()).toBe(0);
    // Every file packed from the bytes its bundle brought: none read back.
    expect(readSmall).not.toHaveBeenCalled();
    expect(mostWriting).toBe(1);
    const packs = await packer.stats();
    expect(packs.length).toBeGreaterThanOrEqual(6);
    for (const f of sent)
      for (const body of Object.values(f)) {
        const loc = await packer.locate(sha(body));
        expect(loc).toBeDefined();
        expect(Buffer.from(await packer.read(loc!))).toEqual(body);
      }
    expect(packer['hot'].size).toBe(0);
  });

  it('loses nothing when a pack write fails in the middle of a flush', async () => {
    const { server, alice } = await setup();
    const packer = server.packer!;
    const readSmall = vi.spyOn(packer['o'], 'readSmall');
    // Held back from the target flush: one flush packs all of it, in several packs.
    const ended = packer.busy();
    const objects = packer['o'].objects;
    const write = objects.write.bind(objects);
    let calls = 0;
    const gate = { open: false };
    vi.spyOn(objects, 'write').mockImplementation(async (...args) => {
      if (!gate.open) throw new Error('not yet');
      if (++calls === 2) throw new Error('object tier down');
      return write(...args);
    });
    // 4 bundles (~160 KiB: 3 packs), sent one after another with the writes refused, so
    // nothing is packed yet; the packer holds what fits of them.
    const sent = Array.from({ length: 4 }, (_, b) => files(`c${b}`, 20, 50 + 1000 * b));
    for (const f of sent) await alice.putSmall(f);
    await packer.flush().catch(() => undefined);
    await packer.flush().catch(() => undefined);
    expect((await packer.stats()).length).toBe(0);
    expect(await packer.pendingCount()).toBe(80);
    gate.open = true;
    readSmall.mockClear();
    // The second of the flush's packs fails: the flush fails, the first pack stays indexed.
    await expect(packer.flush()).rejects.toThrow('object tier down');
    const after = await packer.stats();
    expect(after.length).toBeGreaterThanOrEqual(1);
    const left = await packer.pendingCount();
    expect(left).toBeGreaterThan(0);
    expect(left).toBeLessThan(80);
    // No index entry names a pack that is not there; the next flush packs the rest.
    for (const p of after) expect(await packer.readFooter(p.packId)).toHaveLength(p.entries);
    expect(await packer.flush()).toBeGreaterThanOrEqual(1);
    expect(await packer.pendingCount()).toBe(0);
    for (const f of sent)
      for (const body of Object.values(f)) {
        const loc = await packer.locate(sha(body));
        expect(loc).toBeDefined();
        expect(Buffer.from(await packer.read(loc!))).toEqual(body);
      }
    ended();
  });

  it('does not hold bundles while the object tier is down', async () => {
    const { server, alice } = await setup();
    const packer = server.packer!;
    packer['roomWaitMs'] = 100;
    const objects = packer['o'].objects;
    const write = vi.spyOn(objects, 'write').mockRejectedValue(new Error('object tier down'));
    // 12 bundles at once, then 4 more: none packed, every one answered (each waits at most
    // the room wait with nothing taken, and after one gave up the others do not wait).
    const sent = Array.from({ length: 16 }, (_, b) => files(`d${b}`, 20, 7000 + 1000 * b));
    const answers = await Promise.all(sent.slice(0, 12).map((f) => alice.putSmall(f)));
    for (const f of sent.slice(12)) answers.push(await alice.putSmall(f));
    for (const a of answers) for (const { result } of a) expect(result.status).toBe('applied');
    expect(packer['hot'].size).toBeLessThanOrEqual(2 * packer.targetBytes);
    expect((await packer.stats()).length).toBe(0);
    // Back up: everything is packed, what was not held read back from the filesystem tier.
    write.mockRestore();
    while ((await packer.pendingCount()) > 0) await packer.flush();
    for (const f of sent)
      for (const body of Object.values(f)) {
        const loc = await packer.locate(sha(body));
        expect(Buffer.from(await packer.read(loc!))).toEqual(body);
      }
  });
});
