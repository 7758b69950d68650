/**
 * A single-request S3 put hashes its body once (issue #17): the SHA-256 it computes for
 * ChecksumSHA256 and the metadata is also the SigV4 payload hash, given to the signer as
 * x-amz-content-sha256 instead of the SDK hashing the body again. Against s3proxy, which
 * checks the signature.
 */
import crypto, { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { afterEach, describe, expect, inject, it, vi } from 'vitest';
import { S3Provider } from '../src/adapters/s3.ts';
import { collect } from '../src/body.ts';
import { hashedDuring } from './hashed-during.ts';

const s3 = inject('s3');

afterEach(() => vi.restoreAllMocks());

/** Names of the SDK commands `p` sends from now on, "(streamed)" when the body is a stream. */
function recordCommands(p: S3Provider): string[] {
  const names: string[] = [];
  p.client.middlewareStack.add(
    (next, context) => async (args) => {
      const body = (args.input as { Body?: unknown }).Body;
      names.push(`${context.commandName ?? '?'}${body instanceof Readable ? ' (streamed)' : ''}`);
      return next(args);
    },
    { step: 'initialize', name: 'testRecordCommands' },
  );
  return names;
}

/** `data` as a stream of `size`-byte chunks (each its own copy, as a producer would make). */
async function* chunks(data: Uint8Array, size: number): AsyncIterable<Uint8Array> {
  for (let at = 0; at < data.byteLength; at += size) yield Buffer.from(data.subarray(at, at + size));
}

describe('s3 write the caller verifies (callerVerifies)', () => {
  const provider = () =>
    new S3Provider({
      ...s3,
      credentials: s3,
      prefix: `caller-verifies/${randomBytes(6).toString('hex')}`,
      partSize: 5 * 1024 * 1024,
    });

  it('hashes none of the body, single put, streamed put or multipart; s3proxy takes the unsigned payload', async () => {
    const p = provider();
    const commands = recordCommands(p);
    const cases = [
      // Size unknown, one part: a single put of the buffered body.
      { size: 3 * 1024 * 1024, declared: false, sent: ['PutObjectCommand'] },
      // Size declared: one PutObject streaming the body, small or large (no parts).
      { size: 3 * 1024 * 1024, declared: true, sent: ['PutObjectCommand (streamed)'] },
      { size: 12 * 1024 * 1024 + 5, declared: true, sent: ['PutObjectCommand (streamed)'] },
      // Size unknown: a multipart upload, its parts unsigned.
      {
        size: 12 * 1024 * 1024 + 5,
        declared: false,
        sent: ['CreateMultipartUploadCommand', 'UploadPartCommand', 'CompleteMultipartUploadCommand'],
      },
    ];
    for (const { size, declared, sent } of cases) {
      const data = randomBytes(size);
      const name = `f${size}-${declared}.bin`;
      let e: Awaited<ReturnType<S3Provider['write']>> | undefined;
      commands.length = 0;
      const hashed = await hashedDuring(async () => {
        e = await p.write(name, chunks(data, 1024 * 1024), {
          ...(declared ? { size } : {}),
          callerVerifies: true,
        });
      });
      expect(hashed, `${size} bytes`).toBeLessThan(64 * 1024);
      expect([...new Set(commands)]).toEqual(sent);
      expect(e?.size).toBe(size);
      expect(e?.hash).toBeUndefined();
      expect((await collect(await p.read(name))).equals(data)).toBe(true);
    }
    await p.close();
  });

  it('a streamed put whose body is longer or shorter than declared fails and stores nothing', async () => {
    const p = provider();
    const size = 7 * 1024 * 1024;
    const data = randomBytes(size);
    for (const [body, declared] of [
      [data, size - 1],
      [data, size + 1],
      [data.subarray(0, size - 1024 * 1024), size],
    ] as const) {
      await expect(
        p.write('s.bin', chunks(body, 1024 * 1024), { size: declared, callerVerifies: true }),
      ).rejects.toMatchObject({ code: 'InvalidArgument' });
      await expect(p.stat('s.bin')).rejects.toMatchObject({ code: 'NotFound' });
    }
    await p.write('s.bin', chunks(data, 1024 * 1024), { size, callerVerifies: true });
    expect((await collect(await p.read('s.bin'))).equals(data)).toBe(true);
    await p.close();
  });

  it('with sha256 given it still checks the body: a wrong one fails and stores nothing', async () => {
    const p = provider();
    const data = randomBytes(1024);
    const wrong = crypto.createHash('sha256').update('other').digest('hex');
    await expect(p.write('w.bin', data, { sha256: wrong, callerVerifies: true })).rejects.toMatchObject({
      code: 'InvalidArgument',
    });
    await expect(p.stat('w.bin')).rejects.toMatchObject({ code: 'NotFound' });
    const sha = crypto.createHash('sha256').update(data).digest('hex');
    expect((await p.write('w.bin', data, { sha256: sha, callerVerifies: true })).hash?.value).toBe(sha);
    expect((await p.stat('w.bin')).hash?.value).toBe(sha);
    await p.close();
  });
});

describe('s3 per-request work', () => {
  it("skips the SDK's logger middleware unless a logger is configured, which still gets its entries", async () => {
    const prefix = `logger/${randomBytes(6).toString('hex')}`;
    const quiet = new S3Provider({ ...s3, credentials: s3, prefix });
    expect(quiet.client.middlewareStack.identify().some((m) => m.startsWith('loggerMiddleware'))).toBe(false);
    await quiet.write('a.txt', new TextEncoder().encode('a'));
    expect((await collect(await quiet.read('a.txt'))).toString()).toBe('a');
    await quiet.close();
    const info: unknown[] = [];
    const logger = {
      debug: () => undefined,
      info: (x: unknown) => info.push(x),
      warn: () => undefined,
      error: () => undefined,
    };
    const logged = new S3Provider({ ...s3, credentials: s3, prefix, clientConfig: { logger } });
    expect(logged.client.middlewareStack.identify().some((m) => m.startsWith('loggerMiddleware'))).toBe(true);
    await logged.stat('a.txt');
    expect(info.length).toBeGreaterThan(0);
    await logged.close();
  });
});

describe('s3 single put', () => {
  it('hashes the body once, and the object is stored with its SHA-256', async () => {
    const p = new S3Provider({
      ...s3,
      credentials: s3,
      prefix: `hash-once/${randomBytes(6).toString('hex')}`,
    });
    const data = randomBytes(3 * 1024 * 1024);
    let e: Awaited<ReturnType<S3Provider['write']>> | undefined;
    const hashed = await hashedDuring(async () => {
      e = await p.write('one.bin', data);
    });
    expect(hashed).toBeGreaterThanOrEqual(data.byteLength);
    expect(hashed).toBeLessThan(data.byteLength + 64 * 1024); // not twice
    const sha = crypto.createHash('sha256').update(data).digest('hex');
    expect(e?.hash?.value).toBe(sha);
    expect((await p.stat('one.bin')).hash?.value).toBe(sha);
    expect((await collect(await p.read('one.bin'))).equals(data)).toBe(true);
    await p.close();
  });
});
