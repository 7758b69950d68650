/**
 * Large files through the engine harness: whole uploads in transfer blocks, content the
 * server already holds (linked without sending it again), deltas both ways with the real
 * rsync engines — against the in-memory server, with a small-file threshold of 1 KiB.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { FakeCloud, sha256 } from './support/fake-cloud.ts';

const SMALL = 1024;

function text(n: number, seed: string): string {
  let s = '';
  for (let i = 0; s.length < n; i++) s += `${seed} line ${i}\n`;
  return s.slice(0, n);
}

describe('large files in the harness', () => {
  let cloud: FakeCloud;
  afterEach(() => cloud.close());

  it('a large file whose content the server already holds is linked under its new name (haveObject)', async () => {
    cloud = new FakeCloud({ smallFileBytes: SMALL });
    const a = await cloud.addDevice('laptop', { smallFileBytes: SMALL });
    const b = await cloud.addDevice('desktop', { smallFileBytes: SMALL });
    const big = text(20_000, 'big');
    await a.write('big.bin', big);
    await a.sync();
    // The same content under another name: the server holds it, so no block is sent.
    await a.write('copy of big.bin', big);
    const blocksBefore = a.remote.calls.get('putBlock') ?? 0;
    await a.sync();
    expect(a.remote.calls.get('putBlock') ?? 0).toBe(blocksBefore);
    expect(cloud.serverTree().get('copy of big.bin')).toBe(sha256(big));
    expect(a.engine.journal.pendingOps()).toEqual([]);
    await b.sync();
    expect(await b.read('copy of big.bin')).toBe(big);
  });

  it('an edit of a large file travels as a delta both ways and lands byte-identical', async () => {
    // A 1 MiB/s uplink: on it a delta pays whatever this machine's rsync speed (on an
    // instant link the whole file would win, as it does on loopback).
    cloud = new FakeCloud({ smallFileBytes: SMALL, uploadBytesPerSecond: 1024 * 1024 });
    const a = await cloud.addDevice('laptop', { smallFileBytes: SMALL });
    const b = await cloud.addDevice('desktop', { smallFileBytes: SMALL });
    const v1 = text(200_000, 'v1');
    await a.write('doc.bin', v1);
    await a.sync();
    await b.sync();
    expect(await b.read('doc.bin')).toBe(v1);

    // Up: a few bytes changed in the middle go as a delta against the last synced version.
    const v2 = v1.slice(0, 100_000) + 'EDITED' + v1.slice(100_006);
    await a.write('doc.bin', v2);
    await a.sync();
    expect(a.engine.lastUpload).toMatchObject({ path: 'doc.bin', mode: 'delta' });
    expect(a.engine.lastUpload?.bytes).toBeLessThan(20_000);
    expect(cloud.serverTree().get('doc.bin')).toBe(sha256(v2));

    // Down: the other device sends its signature and patches its copy.
    const deltasBefore = b.remote.calls.get('downloadDelta') ?? 0;
    await b.sync();
    expect(b.remote.calls.get('downloadDelta')).toBe(deltasBefore + 1);
    expect(await b.read('doc.bin')).toBe(v2);

    // The download kept the new base's signature, as an upload does.
    const kept = b.engine.journal.getFile('doc.bin');
    expect(kept?.signature).not.toBeNull();
    expect(kept?.syncedHash).toBe(sha256(v2));
    // An edit based on a version that came down from elsewhere, its signature not kept: the
    // base's signature is the server's. (A small upload first, so that this device has
    // measured its uplink.)
    if (kept) b.engine.journal.upsertFile({ ...kept, signature: null, signatureBlock: null });
    await b.write('note.txt', text(900, 'note'));
    await b.sync();
    const v3 = v2.replace('EDITED', 'edited again');
    await b.write('doc.bin', v3);
    await b.sync();
    expect(b.remote.calls.get('signature')).toBeGreaterThanOrEqual(1);
    expect(b.engine.lastUpload).toMatchObject({ path: 'doc.bin', mode: 'delta' });
    await a.sync();
    expect(await a.read('doc.bin')).toBe(v3);
  });

  it('Eq. 2 is asked before the delta: where no delta can pay, none is computed and no signature fetched', async () => {
    // r_t = 1 byte/s between the server's tiers: the bound r_c·r_t/(2·r_c + r_t) < r_t/2 is
    // below any uplink, whatever this machine's rsync speed — a link "too fast for deltas".
    const plans: Record<string, unknown>[] = [];
    const trace = (event: string, detail: unknown): void => {
      if (event === 'delta-plan') plans.push(detail as Record<string, unknown>);
    };
    cloud = new FakeCloud({ smallFileBytes: SMALL });
    const a = await cloud.addDevice('laptop', { smallFileBytes: SMALL, serverTierRate: 1, trace });
    const b = await cloud.addDevice('desktop', { smallFileBytes: SMALL, serverTierRate: 1, trace });
    const v1 = text(200_000, 'v1');
    await a.write('doc.bin', v1);
    await a.sync();
    await b.sync();
    const v2 = v1.slice(0, 100_000) + 'EDITED' + v1.slice(100_006);
    await b.write('doc.bin', v2);
    await b.sync();
    expect(b.engine.lastUpload).toMatchObject({ path: 'doc.bin', mode: 'whole' });
    expect(b.remote.calls.get('signature') ?? 0).toBe(0);
    expect(plans).toEqual([
      expect.objectContaining({ path: 'doc.bin', use: 'whole', stage: 'bound', gamma: 1 }),
    ]);
    expect(cloud.serverTree().get('doc.bin')).toBe(sha256(v2));
    await a.sync();
    expect(await a.read('doc.bin')).toBe(v2);
  });

  it('a large upload cut off mid-way resumes from the acknowledged blocks', async () => {
    cloud = new FakeCloud({ smallFileBytes: SMALL });
    const a = await cloud.addDevice('laptop', { smallFileBytes: SMALL, blocksInFlight: 1 });
    // 9 MiB: three transfer blocks of 4 MiB at most.
    const big = new Uint8Array(9 * 1024 * 1024).map((_, i) => (i * 7) & 0xff);
    await a.write('video.bin', big);
    const { OfflineError } = await import('../src/remote/proxy-client.ts');
    a.remote.failNext('putBlock', new OfflineError('connection reset'), 1);
    // What the status (tray, transfers list) shows of the upload while it runs.
    const seen: number[] = [];
    a.engine.status.onChange((st) => {
      const t = st.transfers.find((x) => x.path === 'video.bin');
      if (t && seen.at(-1) !== t.bytesDone) seen.push(t.bytesDone);
    });
    await a.sync();
    expect(a.engine.error).toBeInstanceOf(OfflineError);
    expect(cloud.serverTree().has('video.bin')).toBe(false);
    // Listed from its first byte (before a 4 MiB block is done), then block 0's progress;
    // the failed upload is not left on the list.
    expect(seen).toEqual([0, 4 * 1024 * 1024]);
    expect(a.engine.getStatus().transfers).toEqual([]);
    await a.sync();
    expect(cloud.serverTree().get('video.bin')).toBe(sha256(big));
    expect(a.remote.calls.get('createTransfer')).toBe(1);
    // Block 0 was acknowledged before the cut: only blocks 1 and 2 went again (2 + 1 failed + 1 acked).
    expect(a.remote.calls.get('putBlock')).toBe(4);
  });
});
