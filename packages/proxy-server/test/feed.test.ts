import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChangeRecord } from '@weft/wire';
import { readFeed, startTestServer, TestClient } from './helpers.ts';

let server: Awaited<ReturnType<typeof startTestServer>>;
let dev1: TestClient;
let dev2: TestClient;

beforeAll(async () => {
  server = await startTestServer();
  dev1 = await TestClient.enrol(server, 'feeduser', 'one');
  dev2 = await TestClient.enrol(server, 'feeduser', 'two');
});
afterAll(async () => server.stop());

describe('change feed over WebSocket', () => {
  it('deliversEveryChangeOnceInOrderAcrossReconnects', async () => {
    // A writer produces 60 changes while a reader disconnects and resumes several times.
    const writer = (async () => {
      for (let i = 0; i < 20; i++) {
        await dev1.putSmall({ [`f/${i}.txt`]: `v${i}` });
        await dev1.ops({ op: 'mkdir', path: `d/${i}` });
      }
    })();
    const seen: ChangeRecord[] = [];
    let cursor = 0;
    const total = 2 + 20 + 20; // folders f and d, 20 files, 20 subfolders
    while (seen.length < total) {
      // read a few, then drop the connection and resume from the last applied cursor
      const want = Math.min(3, total - seen.length);
      const { changes } = await readFeed(dev2, cursor, (c) => c.length >= want);
      seen.push(...changes);
      cursor = seen.at(-1)?.seq ?? cursor;
    }
    await writer;
    const seqs = seen.map((c) => c.seq);
    expect(seqs).toEqual(seqs.map((_, i) => i + 1)); // 1..n: no gap, no duplicate, in order
    expect(seen.filter((c) => c.path.startsWith('f/')).map((c) => c.path)).toEqual(
      Array.from({ length: 20 }, (_, i) => `f/${i}.txt`),
    );
    expect(seen.every((c) => c.device !== undefined)).toBe(true);
  }, 30_000);

  it('sendsHelloThenLiveChanges', async () => {
    const { seq } = await dev1.json<{ seq: number }>('GET', '/v1/whoami');
    const pending = readFeed(dev2, seq, (c) => c.length >= 1);
    await new Promise((r) => setTimeout(r, 50));
    await dev1.ops({ op: 'move', from: 'f/0.txt', to: 'g/0.txt' });
    const { changes, messages } = await pending;
    expect(messages[0]).toMatchObject({ type: 'hello', user: 'feeduser', seq });
    expect(changes.find((c) => c.type === 'move')).toMatchObject({
      type: 'move',
      from: 'f/0.txt',
      path: 'g/0.txt',
    });
  });

  it('resetsACursorFromTheFuture', async () => {
    const { messages } = await readFeed(dev2, 1_000_000, (_c) => true);
    expect(messages[0]?.type).toBe('hello');
  });
});
