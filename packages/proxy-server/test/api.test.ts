import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type ChangesResponse,
  encodeBundle,
  type EntryInfo,
  type ListResponse,
  parseServerTiming,
  SERVER_TIMING_HEADER,
} from '@weft/wire';
import { startTestServer, TestClient, sha } from './helpers.ts';

let server: Awaited<ReturnType<typeof startTestServer>>;
let alice: TestClient;

beforeAll(async () => {
  server = await startTestServer();
  alice = await TestClient.enrol(server, 'alice', 'laptop');
});
afterAll(async () => server.stop());

describe('enrolment and health', () => {
  it('healthzAnswersWithoutAuth', async () => {
    const res = await fetch(`${server.url}/healthz`);
    expect(await res.json()).toMatchObject({ status: 'ok' });
  });

  it('enrolNeedsTheAdminToken', async () => {
    const res = await fetch(`${server.url}/v1/enrol`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer nope-nope-nope-nope' },
      body: JSON.stringify({ user: 'mallory', deviceName: 'x' }),
    });
    expect(res.status).toBe(403);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('FORBIDDEN');
  });

  it('enrolsWithAOneTimeInvite', async () => {
    const inv = await fetch(`${server.url}/v1/invites`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${server.adminToken}` },
      body: JSON.stringify({ user: 'carol' }),
    });
    const { invite } = (await inv.json()) as { invite: string };
    const enrol = (body: object) =>
      fetch(`${server.url}/v1/enrol`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    expect((await enrol({ user: 'carol', deviceName: 'phone', invite })).status).toBe(201);
    expect((await enrol({ user: 'carol', deviceName: 'phone2', invite })).status).toBe(403);
  });

  it('rejectsUnknownTokens', async () => {
    const res = await fetch(`${server.url}/v1/list`, { headers: { authorization: 'Bearer wft_forged' } });
    expect(res.status).toBe(401);
  });

  it('servesOpenApiAndMetrics', async () => {
    const doc = (await (await fetch(`${server.url}/openapi.json`)).json()) as {
      openapi: string;
      paths: Record<string, unknown>;
    };
    expect(doc.openapi).toBe('3.1.0');
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining(['/v1/ops', '/v1/bundles', '/v1/feed', '/v1/transfers/{id}/blocks']),
    );
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    expect(metrics).toContain('weft_http_requests_total');
    expect(metrics).toContain('weft_relay_cache_hit_ratio');
    expect(metrics).toContain('weft_op_queue_depth');
  });
});

describe('small files through bundles', () => {
  it('uploadsListsDownloadsAndRanges', async () => {
    const results = await alice.putSmall({
      'docs/a.txt': 'hello',
      'docs/sub/b.txt': 'world!',
      'c.bin': new Uint8Array([0, 1, 2, 3]),
    });
    expect(results.map((r) => r.result.status)).toEqual(['applied', 'applied', 'applied']);
    const list = await alice.json<ListResponse>('GET', '/v1/list?path=&recursive=1');
    const paths = list.entries.map((e) => e.path);
    expect(paths).toEqual(
      expect.arrayContaining(['docs', 'docs/a.txt', 'docs/sub', 'docs/sub/b.txt', 'c.bin']),
    );
    const a = list.entries.find((e) => e.path === 'docs/a.txt');
    expect(a).toMatchObject({
      kind: 'file',
      size: 5,
      sha256: sha('hello'),
      tier: 'small',
      mtimeMs: 1_700_000_000_000,
    });
    expect(await alice.text('docs/a.txt')).toBe('hello');
    const part = await alice.get('docs/sub/b.txt', 'bytes=1-3');
    expect(part.status).toBe(206);
    expect(await part.text()).toBe('orl');
    expect((await alice.get('docs/sub/b.txt', 'bytes=99-')).status).toBe(416);
    const top = await alice.json<ListResponse>('GET', '/v1/list?path=docs');
    expect(top.entries.map((e) => e.path)).toEqual(['docs/a.txt', 'docs/sub']);
  });

  it('conditionalWriteMakesAConflictedCopy', async () => {
    const [first] = await alice.putSmall({ 'notes.md': 'v1' });
    const rev1 = first?.result.status === 'applied' ? first.result.entry?.revision : undefined;
    expect(rev1).toBeDefined();
    const [second] = await alice.putSmall({ 'notes.md': 'v2 from laptop' }, { 'notes.md': rev1 ?? null });
    expect(second?.result.status).toBe('applied');
    // Another write still based on rev1: the server keeps both.
    const [third] = await alice.putSmall({ 'notes.md': 'v2 from elsewhere' }, { 'notes.md': rev1 ?? null });
    expect(third?.result.status).toBe('conflict');
    if (third?.result.status !== 'conflict') throw new Error('expected conflict');
    expect(third.result.conflict.conflictPath).toMatch(
      /^notes \(conflicted copy \d{4}-\d\d-\d\d \d{6} from laptop\)\.md$/,
    );
    expect(await alice.text('notes.md')).toBe('v2 from laptop');
    expect(await alice.text(third.result.conflict.conflictPath)).toBe('v2 from elsewhere');
    // Creating over an existing file with the same content is not a conflict.
    const [same] = await alice.putSmall({ 'notes.md': 'v2 from laptop' }, { 'notes.md': null });
    expect(same?.result.status).toBe('applied');
  });

  it('movesCopiesAndDeletes', async () => {
    await alice.putSmall({ 'tree/x/1.txt': 'one', 'tree/x/2.txt': 'two' });
    const [mv] = await alice.ops({ op: 'move', from: 'tree/x', to: 'moved/x2' });
    expect(mv?.status).toBe('applied');
    expect(await alice.text('moved/x2/1.txt')).toBe('one');
    expect((await alice.get('tree/x/1.txt')).status).toBe(404);
    const [cp] = await alice.ops({ op: 'copy', from: 'moved/x2', to: 'copied' });
    expect(cp?.status).toBe('applied');
    expect(await alice.text('copied/2.txt')).toBe('two');
    const st = await alice.json<EntryInfo>('GET', '/v1/stat?path=moved%2Fx2%2F2.txt');
    const [stale] = await alice.ops({ op: 'delete', path: 'moved/x2/2.txt', baseRevision: 'r1' });
    expect(stale?.status).toBe('conflict');
    const [del] = await alice.ops({ op: 'delete', path: 'moved/x2/2.txt', baseRevision: st.revision });
    expect(del?.status).toBe('applied');
    const [rmdir] = await alice.ops({ op: 'delete', path: 'copied' });
    expect(rmdir?.status).toBe('applied');
    expect((await alice.get('copied/1.txt')).status).toBe(404);
    const [bad] = await alice.ops({ op: 'move', from: 'moved', to: 'moved/inside' });
    expect(bad?.status).toBe('error');
    const [mk] = await alice.ops({ op: 'mkdir', path: 'empty/deep' });
    expect(mk?.status).toBe('applied');
  });

  it('changeFeedOverHttpIsOrderedAndGapFree', async () => {
    const page = await alice.json<ChangesResponse>('GET', '/v1/changes?cursor=0&limit=5000');
    const seqs = page.changes.map((c) => c.seq);
    expect(seqs[0]).toBe(1);
    expect(seqs).toEqual(seqs.map((_, i) => i + 1));
    const tail = await alice.json<ChangesResponse>('GET', `/v1/changes?cursor=${page.cursor + 100}`);
    expect(tail.reset).toBe(true);
  });

  it('statesItsOwnTimeInServerTiming', async () => {
    // The agent takes it off a bundle request's time to learn its link's rate (issue #16).
    const content = new TextEncoder().encode('timed');
    const body = encodeBundle([
      { path: 'timed.txt', mtimeMs: 1_700_000_000_000, sha256: sha(content), content },
    ]);
    const started = performance.now();
    const res = await alice.req('POST', '/v1/bundles', body);
    const elapsed = performance.now() - started;
    expect(res.status).toBe(200);
    const serverMs = parseServerTiming(res.headers.get(SERVER_TIMING_HEADER));
    expect(serverMs).toBeDefined();
    expect(serverMs!).toBeGreaterThan(0);
    expect(serverMs!).toBeLessThanOrEqual(elapsed);
    // Errors say it too (a refused bundle's time is the server's as well).
    const bad = await alice.req('POST', '/v1/bundles', new Uint8Array([1, 2, 3]));
    expect(bad.status).toBe(400);
    expect(parseServerTiming(bad.headers.get(SERVER_TIMING_HEADER))).toBeDefined();
  });

  it('rejectsBadInputWith4xx', async () => {
    expect((await alice.req('POST', '/v1/bundles', new Uint8Array([1, 2, 3]))).status).toBe(400);
    expect((await alice.req('GET', '/v1/files?path=..%2Fetc%2Fpasswd')).status).toBe(400);
    expect((await alice.req('POST', '/v1/ops', { ops: [{ op: 'mkdir', path: '/abs' }] })).status).toBe(400);
    expect((await alice.req('POST', '/v1/ops', '{not json')).status).toBe(400);
    expect((await alice.req('POST', '/v1/ops', { ops: [{ op: 'mkdir', path: 'x.weftlink' }] })).status).toBe(
      400,
    );
  });
});

describe('back-pressure', () => {
  it('answersSlowDownWhenTheQueueIsFull', async () => {
    const busy = await startTestServer({ maxQueueDepth: 1 });
    try {
      const c = await TestClient.enrol(busy, 'busy');
      const res = await c.req('POST', '/v1/ops', {
        ops: [
          { op: 'mkdir', path: 'a' },
          { op: 'mkdir', path: 'b' },
        ],
      });
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe('1');
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('SLOW_DOWN');
      expect((await c.ops({ op: 'mkdir', path: 'a' }))[0]?.status).toBe('applied');
    } finally {
      await busy.stop();
    }
  });
});

describe('ordered apply through the API', () => {
  it('appliesRelatedOperationsInRequestOrder', async () => {
    const c = await TestClient.enrol(server, 'orderly');
    for (let round = 0; round < 5; round++) {
      const results = await c.ops(
        { op: 'mkdir', path: `p${round}/inner` },
        { op: 'move', from: `p${round}`, to: `q${round}` },
        { op: 'mkdir', path: `p${round}` },
        { op: 'copy', from: `q${round}`, to: `p${round}/copy` },
        { op: 'delete', path: `q${round}/inner` },
        { op: 'mkdir', path: `unrelated${round}` },
      );
      expect(results.map((r) => r.status)).toEqual([
        'applied',
        'applied',
        'applied',
        'applied',
        'applied',
        'applied',
      ]);
    }
    const list = await c.json<ListResponse>('GET', '/v1/list?path=&recursive=1');
    const paths = list.entries.map((e) => e.path);
    for (let round = 0; round < 5; round++) {
      expect(paths).toEqual(
        expect.arrayContaining([
          `p${round}`,
          `p${round}/copy`,
          `p${round}/copy/inner`,
          `q${round}`,
          `unrelated${round}`,
        ]),
      );
      expect(paths).not.toContain(`q${round}/inner`);
    }
  });
});
