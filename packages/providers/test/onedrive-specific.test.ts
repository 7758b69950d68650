import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { OneDriveEmulator } from '@weft/cloud-emulators/onedrive';
import { OneDriveProvider } from '../src/adapters/onedrive.ts';
import { collect } from '../src/body.ts';

let emu: OneDriveEmulator;
beforeAll(async () => {
  emu = await new OneDriveEmulator({ tls: inject('emulatorTls') }).start();
});
afterAll(() => emu.close());

const fresh = (extra: { fragmentSize?: number } = {}): OneDriveProvider =>
  new OneDriveProvider({
    token: emu.accessToken,
    root: `specific/${randomBytes(4).toString('hex')}`,
    graphOrigin: emu.apiOrigin,
    ...extra,
  });
const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');

describe('onedrive adapter specifics', () => {
  it('upload sessions resume from nextExpectedRanges after dropped fragments, without the token', async () => {
    const p = fresh({ fragmentSize: 320 * 1024 });
    const data = randomBytes(6 * 320 * 1024 + 77);
    emu.faults.add({
      endpoint: 'uploadSession',
      method: 'PUT',
      nth: [1],
      action: { kind: 'reset', when: 'after' },
    });
    emu.faults.add({
      endpoint: 'uploadSession',
      method: 'PUT',
      nth: [4],
      action: { kind: 'reset', when: 'before' },
    });
    emu.faults.add({
      endpoint: 'uploadSession',
      method: 'PUT',
      nth: [6],
      action: { kind: 'status', status: 503, retryAfterSeconds: 0 },
    });
    const before = emu.requestLog.length;
    try {
      await p.write('big.bin', data, { size: data.byteLength });
    } finally {
      emu.faults.clear();
    }
    const log = emu.requestLog.slice(before);
    expect(
      log.filter((r) => r.endpoint === 'uploadSession' && r.method === 'GET').length,
    ).toBeGreaterThanOrEqual(2);
    expect(sha(await collect(await p.read('big.bin')))).toBe(sha(data));
    expect(emu.openSessions()).toBe(0);
  });

  it('reads through the 302 to the pre-authenticated URL, with Range', async () => {
    const p = fresh();
    const data = randomBytes(50_000);
    await p.write('r.bin', data);
    const before = emu.requestLog.length;
    const part = await collect(await p.read('r.bin', { offset: 1000, length: 500 }));
    expect(part.equals(data.subarray(1000, 1500))).toBe(true);
    expect(emu.requestLog.slice(before).map((r) => r.endpoint)).toEqual([
      'driveItem.content.get',
      'download',
    ]);
  });

  it('410 resyncRequired resets the feed; moves appear as delete + upsert', async () => {
    const p = fresh();
    await p.write('m/a.txt', Buffer.from('a'));
    const cursor = await p.latestCursor();
    await p.move('m/a.txt', 'n/b.txt');
    const page = await p.changes(cursor);
    const rel = page.changes.filter((c) => c.path.endsWith('.txt')).map((c) => `${c.type}:${c.path}`);
    expect(rel).toEqual(['delete:m/a.txt', 'upsert:n/b.txt']);
    emu.expireCursors();
    const reset = await p.changes(page.cursor);
    expect(reset.reset).toBe(true);
    expect((await p.changes(reset.cursor)).reset).toBe(false);
  });
  it('feed: a file changed inside a folder, then the folder moved — resolved under its new path', async () => {
    const root = `specific/${randomBytes(4).toString('hex')}`;
    const make = (): OneDriveProvider =>
      new OneDriveProvider({ token: emu.accessToken, root, graphOrigin: emu.apiOrigin });
    const person = make();
    const mirror = make();
    await mirror.write('notes/old/f1.txt', Buffer.from('a'));
    await mirror.write('notes/old/f2.txt', Buffer.from('b'));
    let cursor = await mirror.latestCursor();
    await person.move('notes/old/f1.txt', 'notes/old/r1.txt');
    await person.move('notes/old', 'moved');
    const out: string[] = [];
    for (;;) {
      const page = await mirror.changes(cursor);
      out.push(...page.changes.map((c) => `${c.type}:${c.path}`));
      cursor = page.cursor;
      if (!page.hasMore) break;
    }
    // Nothing is reported as being at a path it no longer has (deletes of old paths are fine).
    expect(out.filter((c) => c.startsWith('upsert:notes/old'))).toEqual([]);
    expect(out, JSON.stringify(out)).toContain('delete:notes/old');
    expect(out).toContain('upsert:moved/r1.txt');
    expect(out).toContain('upsert:moved/f2.txt');
  });
});
