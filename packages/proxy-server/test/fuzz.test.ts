/**
 * Every parser that reads client input, through the real HTTP API: bundles, transfer
 * blocks, delta containers, signatures, JSON bodies and paths. Each malformed input gets
 * a 4xx with a clear error body; the server never crashes and never writes outside the
 * namespace. CI runs a scaled-down count; WEFT_FULL=1 runs 100,000+ inputs. The resource
 * properties (issue #14) check that a delta never makes the server write more than its
 * declared size and that declared sizes, offsets and lengths are bounded.
 */
import { readFileSync } from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { collect, signature } from '@weft/rsync-wasm';
import {
  encodeBundle,
  encodeDeltaContainer,
  encodeTransferBlock,
  type EntryInfo,
  type TransferState,
} from '@weft/wire';
import { crc32 } from 'node:zlib';
import { pseudoRandom, sha, startTestServer, TestClient } from './helpers.ts';

const FULL = process.env.WEFT_FULL === '1';
/** Inputs per property; with WEFT_FULL=1, 17,000 each (over 100,000 in all). */
const RUNS = FULL ? 17_000 : 400;

let server: Awaited<ReturnType<typeof startTestServer>>;
let c: TestClient;
let transfer: TransferState;
let base: EntryInfo;
let validBundle: Uint8Array;
let validBlock: Uint8Array;
let validDelta: Uint8Array;
let validSig: Uint8Array;
let count = 0;

beforeAll(async () => {
  server = await startTestServer({ smallFileBytes: 64 * 1024 });
  c = await TestClient.enrol(server, 'fuzz', 'fuzzer');
  const content = Buffer.from('fuzz target');
  validBundle = encodeBundle([{ path: 'ok/a.txt', mtimeMs: 1, sha256: sha(content), content }], {
    compress: true,
  });
  const big = pseudoRandom(100_000, 3);
  transfer = await c.json<TransferState>('POST', '/v1/transfers', {
    path: 'big.bin',
    size: big.length,
    sha256: sha(big),
    mtimeMs: 1,
  });
  validBlock = encodeTransferBlock(
    { transferId: transfer.transferId, seq: 0, offset: 0, last: false, payload: big.subarray(0, 5000) },
    { compress: true },
  );
  await c.req(
    'PUT',
    `/v1/transfers/${transfer.transferId}/blocks`,
    encodeTransferBlock({ transferId: transfer.transferId, seq: 0, offset: 0, last: true, payload: big }),
  );
  await c.ops({
    op: 'commit',
    path: 'big.bin',
    sha256: sha(big),
    size: big.length,
    mtimeMs: 1,
    transferId: transfer.transferId,
  });
  base = await c.json<EntryInfo>('GET', '/v1/stat?path=big.bin');
  transfer = await c.json<TransferState>('POST', '/v1/transfers', {
    path: 'big2.bin',
    size: big.length,
    sha256: sha(big),
    mtimeMs: 1,
  });
  validSig = await collect(signature(big, { blockSize: 1024 }));
  validDelta = encodeDeltaContainer(
    {
      baseSha256: sha(big),
      targetSha256: sha('x'),
      targetSize: 1,
      delta: Buffer.concat([Buffer.from('WFTD'), pseudoRandom(200, 9)]),
    },
    { compress: true },
  );
});

afterAll(async () => {
  // Nothing was written outside the namespace: only the expected layout exists.
  const top = (await fsp.readdir(server.dir)).sort();
  expect(
    top.filter(
      (n) => !/^(fs|objects|(metadata|mirror)\.sqlite(-wal|-shm)?|mirror\.key|pack-stub\.key)$/.test(n),
    ),
  ).toEqual([]);
  const fsTop = (await fsp.readdir(nodePath.join(server.dir, 'fs'))).sort();
  expect(fsTop.filter((n) => !['.weft-fs', 'ns', 'relay', 'staging', 'versions'].includes(n))).toEqual([]);
  expect(await fsp.readdir(nodePath.join(server.dir, 'fs/ns'))).toEqual(['fuzz']);
  expect(count).toBeGreaterThanOrEqual(RUNS * 7);
  await server.stop();
});

async function expect4xx(res: Response, what: string): Promise<void> {
  count += 1;
  const text = await res.text();
  if (res.status < 400 || res.status >= 500)
    throw new Error(`${what}: status ${res.status} ${text.slice(0, 300)}`);
  const body = JSON.parse(text) as { error?: { code?: string; message?: string } };
  if (!body.error?.code || !body.error.message)
    throw new Error(`${what}: no clear error body: ${text.slice(0, 300)}`);
}

async function expectNot5xx(res: Response, what: string): Promise<void> {
  count += 1;
  const text = await res.text();
  if (res.status >= 500) throw new Error(`${what}: status ${res.status} ${text.slice(0, 300)}`);
}

type Mutation =
  | { kind: 'flip'; at: number; xor: number }
  | { kind: 'cut'; at: number }
  | { kind: 'append'; extra: Uint8Array }
  | { kind: 'random'; bytes: Uint8Array };

const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({ kind: fc.constant('flip' as const), at: fc.nat(), xor: fc.integer({ min: 1, max: 255 }) }),
  fc.record({ kind: fc.constant('cut' as const), at: fc.nat() }),
  fc.record({ kind: fc.constant('append' as const), extra: fc.uint8Array({ minLength: 1, maxLength: 16 }) }),
  fc.record({ kind: fc.constant('random' as const), bytes: fc.uint8Array({ maxLength: 300 }) }),
);

function mutate(bytes: Uint8Array, m: Mutation): Uint8Array {
  switch (m.kind) {
    case 'flip': {
      const out = bytes.slice();
      const i = m.at % out.length;
      out[i] = (out[i] ?? 0) ^ m.xor;
      return out;
    }
    case 'cut':
      return bytes.subarray(0, m.at % bytes.length);
    case 'append':
      return Buffer.concat([bytes, m.extra]);
    case 'random':
      return m.bytes;
  }
}

/** A structurally valid bundle (right CRC) around arbitrary path bytes. */
function rawBundle(pathBytes: Uint8Array): Uint8Array {
  const content = Buffer.from('x');
  const entry = Buffer.concat([
    Buffer.from(Uint16Array.of(pathBytes.length).buffer),
    pathBytes,
    Buffer.from([0]),
    Buffer.alloc(8),
    Buffer.from(Uint32Array.of(1).buffer),
    Buffer.from(sha(content), 'hex'),
    content,
  ]);
  const header = Buffer.alloc(24);
  header.write('WFTB', 0, 'latin1');
  header[4] = 1;
  header.writeUInt32LE(1, 8);
  header.writeUInt32LE(entry.length, 12);
  header.writeUInt32LE(entry.length, 16);
  const body = Buffer.concat([header, entry]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32LE(crc32(body) >>> 0);
  return Buffer.concat([body, crc]);
}

const nastyPath = fc.oneof(
  fc.constantFrom(
    '..',
    '../x',
    '/etc/passwd',
    'a/../../b',
    'a//b',
    './a',
    'a/.',
    'nul\0x',
    'x.weftlink',
    'a/b.WEFTLINK/c',
    '.weft-fs/x',
    'e\u0301',
    '\uD800',
    'a/',
    '',
  ),
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.constant('a'.repeat(5000)),
);

describe('fuzzing every parser of client input', () => {
  it('bundles', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          mutation.map((m) => ({ m })),
          fc.uint8Array({ maxLength: 300 }).map((p) => ({ p })),
        ),
        async (x) => {
          const bytes = 'm' in x ? mutate(validBundle, x.m) : rawBundle(x.p);
          const res = await c.req('POST', '/v1/bundles', bytes);
          if ('m' in x) await expect4xx(res, 'bundle');
          else await expectNot5xx(res, 'bundle path');
        },
      ),
      { numRuns: RUNS },
    );
  }, 600_000);

  it('transferBlocks', async () => {
    await fc.assert(
      fc.asyncProperty(mutation, async (m) => {
        const res = await c.req('PUT', `/v1/transfers/${transfer.transferId}/blocks`, mutate(validBlock, m));
        await expect4xx(res, 'block');
      }),
      { numRuns: RUNS },
    );
  }, 600_000);

  it('deltaContainers', async () => {
    await fc.assert(
      fc.asyncProperty(fc.oneof(mutation, fc.constant(null)), async (m) => {
        const bytes = m === null ? validDelta : mutate(validDelta, m);
        const res = await c.req(
          'POST',
          `/v1/deltas?path=big.bin&baseRevision=${base.revision}&mtimeMs=1`,
          bytes,
        );
        await expect4xx(res, 'delta');
      }),
      { numRuns: RUNS },
    );
  }, 600_000);

  it('signatures', async () => {
    await fc.assert(
      fc.asyncProperty(mutation, async (m) => {
        const bytes = mutate(validSig, m);
        const res = await c.req('POST', `/v1/files/delta?path=big.bin&baseSha256=${sha('old')}`, bytes);
        await expectNot5xx(res, 'signature'); // a mutation may still be a valid signature
      }),
      { numRuns: RUNS },
    );
  }, 600_000);

  it('jsonBodies', async () => {
    const routes = [
      '/v1/ops',
      '/v1/transfers',
      '/v1/merkle',
      '/v1/bundles/download',
      '/v1/enrol',
      '/v1/invites',
    ];
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...routes),
        fc.oneof(
          fc.jsonValue().map((v) => JSON.stringify(v)),
          fc.string({ maxLength: 100 }),
          fc
            .record({
              ops: fc.array(
                fc.record({
                  op: fc.constantFrom('mkdir', 'delete', 'move', 'copy', 'commit'),
                  path: nastyPath,
                  from: nastyPath,
                  to: nastyPath,
                }),
              ),
            })
            .map((v) => JSON.stringify(v)),
        ),
        async (route, body) => {
          const res = await fetch(`${c.url}${route}`, {
            method: 'POST',
            headers: c.headers({ 'content-type': 'application/json' }),
            body,
          });
          await expectNot5xx(res, `${route} ${body.slice(0, 100)}`);
        },
      ),
      { numRuns: RUNS },
    );
  }, 600_000);

  it('paths', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          nastyPath.map((p) => Buffer.from(p, 'utf8')),
          fc.uint8Array({ maxLength: 40 }),
        ),
        fc.constantFrom('/v1/files', '/v1/stat', '/v1/list'),
        async (p, route) => {
          const encoded = [...p].map((b) => '%' + b.toString(16).padStart(2, '0')).join('');
          const res = await c.req('GET', `${route}?path=${encoded}`);
          await expectNot5xx(res, `${route} ${encoded}`);
        },
      ),
      { numRuns: RUNS },
    );
    const [mk] = await c.ops({ op: 'mkdir', path: 'still/works' });
    expect(mk?.status).toBe('applied');
  }, 600_000);

  it('names', async () => {
    // Names built to hide or reorder text, or to mean something on another platform: a write
    // that would create one with a control or bidi character is INVALID_PATH, and no name the
    // server stores ever holds one (issue #14).
    const tricky = fc.constantFrom(
      '\u0000',
      '\u0001',
      '\u0009',
      '\u000a',
      '\u001b',
      '\u007f',
      '\u0085',
      '\u009f',
      '\u061c',
      '\u200e',
      '\u200f',
      '\u202a',
      '\u202b',
      '\u202c',
      '\u202d',
      '\u202e',
      '\u2066',
      '\u2067',
      '\u2068',
      '\u2069',
      '\\',
      ':',
      'C:',
      'CON',
      'aux.',
      ' ',
      '.',
      '..',
      '/',
      '\uFF1A',
      '\u200b',
      'e\u0301',
      '\uD83D\uDE00',
      '\uD800',
    );
    const name = fc
      .array(fc.oneof(tricky, fc.string({ maxLength: 6 }), fc.string({ unit: 'binary', maxLength: 4 })), {
        minLength: 1,
        maxLength: 8,
      })
      .map((parts) => `names/${parts.join('')}`);
    await fc.assert(
      fc.asyncProperty(name, fc.constantFrom('bundle', 'mkdir', 'move'), async (path, how) => {
        let bundle: Uint8Array | undefined;
        try {
          bundle = encodeBundle([{ path, mtimeMs: 1, sha256: sha('n'), content: Buffer.from('n') }]);
        } catch {
          // The encoder refuses what no canonical path can be (NUL, `..`): sent as an op instead.
        }
        const res =
          how === 'bundle' && bundle
            ? await c.req('POST', '/v1/bundles', bundle)
            : await c.req('POST', '/v1/ops', {
                ops: [
                  how === 'mkdir' ? { op: 'mkdir', path } : { op: 'move', from: 'names-src/x', to: path },
                ],
              });
        const text = await res.text();
        count += 1;
        if (res.status >= 500) throw new Error(`${how} ${JSON.stringify(path)}: ${res.status} ${text}`);
        if (UNPRINTABLE.test(path) && res.status !== 400)
          throw new Error(
            `${how} ${JSON.stringify(path)} was not refused: ${res.status} ${text.slice(0, 200)}`,
          );
        if (UNPRINTABLE.test(path) && !text.includes('INVALID_PATH'))
          throw new Error(`${how} ${JSON.stringify(path)}: not INVALID_PATH: ${text.slice(0, 200)}`);
      }),
      { numRuns: RUNS },
    );
    const all = await c.json<{ entries: { path: string }[] }>('GET', '/v1/list?path=&recursive=1');
    expect(all.entries.filter((e) => UNPRINTABLE.test(e.path))).toEqual([]);
  }, 600_000);
});

// eslint-disable-next-line no-control-regex
const UNPRINTABLE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/;

// ---------------------------------------------------------------- resource limits (issue #14)

/** Bytes this process has passed to write(2) so far (Linux /proc/self/io `wchar`). */
function bytesWritten(): number {
  const m = /^wchar:\s+(\d+)$/m.exec(readFileSync('/proc/self/io', 'utf8'));
  return Number(m?.[1] ?? NaN);
}

function varint(n: number): number[] {
  const out: number[] = [];
  do {
    out.push((n % 128) | (n >= 128 ? 0x80 : 0));
    n = Math.floor(n / 128);
  } while (n > 0);
  return out;
}

type DeltaOp = { op: 'copy'; offset: number; length: number } | { op: 'literal'; length: number };

/** An rsync-wasm delta (no checksum) over an old file of `oldLength` bytes, and its output size. */
function buildDelta(
  oldLength: number,
  ops: DeltaOp[],
  endLength?: number,
): { bytes: Buffer; output: number } {
  const header = Buffer.alloc(24);
  header.write('WFTD', 0, 'latin1');
  header[4] = 1;
  header.writeUInt32LE(1024, 8);
  header.writeBigUInt64LE(BigInt(oldLength), 16);
  const out: number[] = [...header];
  let cursor = 0;
  let output = 0;
  for (const o of ops) {
    if (o.op === 'copy') {
      const offset = o.offset % oldLength;
      const length = Math.min(o.length, oldLength - offset);
      const diff = offset - cursor;
      out.push(0x02, ...varint(diff >= 0 ? 2 * diff : -2 * diff - 1), ...varint(length));
      cursor = offset + length;
      output += length;
    } else {
      out.push(0x01, ...varint(o.length), ...new Array<number>(o.length).fill(0x5a));
      output += o.length;
    }
  }
  out.push(0x00, ...varint(endLength ?? output));
  return { bytes: Buffer.from(out), output };
}

async function stagingTemps(): Promise<string[]> {
  return (await fsp.readdir(nodePath.join(server.dir, 'fs', 'staging'))).filter((n) => n.startsWith('tmp-'));
}

describe('fuzzing resource limits', () => {
  it('deltaAmplification', async () => {
    const bigBefore = await c.json<EntryInfo>('GET', '/v1/stat?path=big.bin');
    const old = await c.bytes('big.bin'); // also stages the base in the relay cache
    const deltaOp: fc.Arbitrary<DeltaOp> = fc.oneof(
      // Whole-file and large copies, repeated: the amplification.
      fc.record({
        op: fc.constant('copy' as const),
        offset: fc.oneof(fc.constant(0), fc.nat(old.length - 1)),
        length: fc.oneof(fc.constant(old.length), fc.integer({ min: 1, max: old.length })),
      }),
      fc.record({ op: fc.constant('literal' as const), length: fc.integer({ min: 1, max: 2000 }) }),
    );
    let refused = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(deltaOp, { minLength: 1, maxLength: 60 }),
        fc.oneof(fc.nat(300_000), fc.constant(0)),
        fc.boolean(),
        fc.boolean(),
        async (ops, declaredRaw, honestEnd, compress) => {
          const d = buildDelta(old.length, ops, honestEnd ? undefined : declaredRaw);
          // Declared size: at most the real output (amplification) or above it with a wrong
          // hash — never a delta the server should accept.
          const declared = Math.min(declaredRaw, d.output);
          const container = encodeDeltaContainer(
            {
              baseSha256: sha(old),
              targetSha256: sha('not the output'),
              targetSize: declared,
              delta: d.bytes,
            },
            { compress },
          );
          const before = bytesWritten();
          const res = await c.req(
            'POST',
            `/v1/deltas?path=big.bin&baseRevision=${bigBefore.revision}&mtimeMs=1`,
            container,
          );
          await expect4xx(res, `delta of ${d.output} bytes declared ${declared}`);
          const written = bytesWritten() - before;
          // The declared size plus one output buffer, plus the request and response themselves.
          const bound = declared + 256 * 1024 + container.byteLength + 16 * 1024;
          if (written > bound)
            throw new Error(
              `delta declared ${declared} (output ${d.output}): ${written} bytes written > ${bound}`,
            );
          const left = await stagingTemps();
          if (left.length > 0) throw new Error(`a refused delta left ${left.join(', ')} behind`);
          refused += 1;
        },
      ),
      { numRuns: RUNS },
    );
    expect(refused).toBe(RUNS);
    expect(await stagingTemps()).toEqual([]);
    const bigAfter = await c.json<EntryInfo>('GET', '/v1/stat?path=big.bin');
    expect(bigAfter.revision).toBe(bigBefore.revision);
  }, 600_000);

  it('declaredSizes', async () => {
    const MAX = server.config.maxFileBytes;
    const size = fc.oneof(
      fc.integer({ min: 0, max: 1 << 20 }),
      fc.integer({ min: MAX - 2, max: MAX + 2 }),
      fc.integer({ min: MAX, max: Number.MAX_SAFE_INTEGER }),
      fc.constantFrom(-1, 1.5, Number.MAX_SAFE_INTEGER + 2, 2 ** 64, '12', null),
    );
    const block = fc.record({
      offset: fc.oneof(fc.nat(1 << 20), fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER - (1 << 20) })),
      length: fc.integer({ min: 0, max: 4096 }),
    });
    await fc.assert(
      fc.asyncProperty(size, fc.array(block, { maxLength: 3 }), async (declared, blocks) => {
        const res = await c.req('POST', '/v1/transfers', {
          path: 'sizes/x.bin',
          size: declared,
          sha256: sha('sizes'),
          mtimeMs: 1,
        });
        const valid = typeof declared === 'number' && Number.isSafeInteger(declared) && declared >= 0;
        if (!valid || declared > MAX) {
          const text = await res.clone().text();
          await expect4xx(res, `transfer of ${String(declared)}`);
          const code = (JSON.parse(text) as { error: { code: string } }).error.code;
          const want = valid ? 'FILE_TOO_LARGE' : 'BAD_REQUEST';
          if (code !== want) throw new Error(`transfer of ${String(declared)}: ${code}, expected ${want}`);
          return;
        }
        count += 1;
        if (res.status !== 201) throw new Error(`transfer of ${declared}: status ${res.status}`);
        const t = (await res.json()) as TransferState;
        const staged = nodePath.join(server.dir, 'fs', 'staging', t.transferId);
        try {
          for (const [seq, b] of blocks.entries()) {
            const r = await c.req(
              'PUT',
              `/v1/transfers/${t.transferId}/blocks`,
              encodeTransferBlock({
                transferId: t.transferId,
                seq,
                offset: b.offset,
                last: false,
                payload: pseudoRandom(b.length, seq),
              }),
            );
            if (b.offset + b.length > declared) await expect4xx(r, `block past ${declared}`);
            else await expectNot5xx(r, `block inside ${declared}`);
            const st = await fsp.stat(staged);
            if (st.size > declared)
              throw new Error(`staging file of ${st.size} bytes for a ${declared}-byte transfer`);
          }
        } finally {
          await c.req('DELETE', `/v1/transfers/${t.transferId}`);
        }
      }),
      { numRuns: RUNS },
    );
  }, 600_000);
});
