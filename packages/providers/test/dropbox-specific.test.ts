import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DropboxEmulator } from '@weft/cloud-emulators/dropbox';
import { DropboxProvider } from '../src/adapters/dropbox.ts';
import { collect } from '../src/body.ts';

let emu: DropboxEmulator;
beforeAll(async () => {
  emu = await new DropboxEmulator({ longpollTimeScale: 0.001 }).start();
});
afterAll(() => emu.close());

const fresh = (extra: { chunkSize?: number; batchSize?: number } = {}): DropboxProvider =>
  new DropboxProvider({
    token: emu.accessToken,
    root: `/specific/${randomBytes(4).toString('hex')}`,
    baseUrl: emu.url,
    ...extra,
  });
const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');

describe('dropbox adapter specifics', () => {
  it('commits many small files in batches, one batch in flight', async () => {
    const p = fresh({ batchSize: 20 });
    const before = emu.requestLog.length;
    await Promise.all(Array.from({ length: 60 }, (_, i) => p.write(`b/f${i}.txt`, Buffer.from(`f${i}`))));
    const log = emu.requestLog.slice(before);
    const batches = log.filter((r) => r.endpoint === 'files/upload_session/finish_batch_v2').length;
    expect(batches).toBeGreaterThanOrEqual(3);
    expect(batches).toBeLessThan(60);
    expect(log.filter((r) => r.endpoint === 'files/upload')).toHaveLength(0);
    expect(emu.maxBatchesInFlight).toBe(1);
    expect(emu.openSessions()).toBe(0);
  });

  it('upload sessions resume from correct_offset after dropped appends', async () => {
    const p = fresh({ chunkSize: 4 * 1024 * 1024 });
    const data = randomBytes(13 * 1024 * 1024 + 5);
    // The first append arrives but its answer is lost; the third never arrives.
    emu.faults.add({
      endpoint: 'files/upload_session/append_v2',
      nth: [0],
      action: { kind: 'reset', when: 'after' },
    });
    emu.faults.add({
      endpoint: 'files/upload_session/append_v2',
      nth: [2],
      action: { kind: 'reset', when: 'before' },
    });
    try {
      const e = await p.write(
        'big.bin',
        () =>
          (async function* () {
            yield data;
          })(),
        { size: data.byteLength },
      );
      expect(e.size).toBe(data.byteLength);
    } finally {
      emu.faults.clear();
    }
    expect(sha(await collect(await p.read('big.bin')))).toBe(sha(data));
  });

  it('longpoll waits for changes; continue reports them; an expired cursor resets', async () => {
    const p = fresh();
    await p.mkdir('w');
    const cursor = await p.latestCursor();
    // Nothing changes: answered at the end of the (scaled: 30 ms) timeout.
    expect(await p.waitForChanges(cursor, 30)).toEqual({ changes: false, backoffMs: 0 });
    // A change while one waits. Scaled, this wait would end after 480 ms, and a write slower
    // than that (a loaded machine: it failed once so) would land after it: so it runs at full
    // length, and the write is made slower than the scaled wait, to show the answer does not
    // depend on how fast the write is.
    emu.longpollTimeScale = 1;
    const slow = ['files/upload', 'files/upload_session/start', 'files/upload_session/finish_batch_v2'].map(
      (endpoint) => emu.faults.add({ endpoint, action: { kind: 'latency', ms: 1000 } }),
    );
    try {
      const waiting = p.waitForChanges(cursor, 480);
      await p.write('w/new.txt', Buffer.from('n'));
      expect((await waiting).changes).toBe(true);
    } finally {
      for (const off of slow) off();
      emu.longpollTimeScale = 0.001;
    }
    const page = await p.changes(cursor);
    expect(page.changes.map((c) => `${c.type}:${c.path}`)).toEqual(['upsert:w/new.txt']);
    emu.expireCursors();
    const reset = await p.changes(page.cursor);
    expect(reset.reset).toBe(true);
    expect((await p.changes(reset.cursor)).reset).toBe(false);
  });
});
