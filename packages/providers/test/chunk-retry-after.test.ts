/**
 * Drive's resumable uploads and OneDrive's upload sessions retry a refused chunk themselves,
 * keeping the session: the wait after a 429 or 503 is the answer's Retry-After (delay-seconds
 * or an HTTP-date), capped; without one it is the chunk backoff. Through the emulators and
 * the adapters' own request paths; the waits are recorded by an injected sleep, not slept.
 */
import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { FaultRule } from '@weft/cloud-emulators';
import { GDriveEmulator } from '@weft/cloud-emulators/gdrive';
import { OneDriveEmulator } from '@weft/cloud-emulators/onedrive';
import { GDriveProvider } from '../src/adapters/gdrive.ts';
import { classifyGDrive } from '../src/adapters/gdrive/errors.ts';
import { OneDriveProvider } from '../src/adapters/onedrive.ts';
import { collect } from '../src/body.ts';
import { TransientError } from '../src/errors.ts';
import type { Provider } from '../src/provider.ts';

let drive: GDriveEmulator;
let onedrive: OneDriveEmulator;
beforeAll(async () => {
  [drive, onedrive] = await Promise.all([
    new GDriveEmulator().start(),
    new OneDriveEmulator({ tls: inject('emulatorTls') }).start(),
  ]);
});
afterAll(async () => {
  await Promise.all([drive.close(), onedrive.close()]);
});

const KiB = 1024;
const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');
type Action = Extract<FaultRule['action'], { kind: 'status' }>;

interface Case {
  readonly name: string;
  /** A provider whose chunk waits go to `waits`; chunks small enough for several per file. */
  make(waits: number[], extra?: { maxRetryAfterMs?: number }): Provider;
  /** The emulator's endpoint for chunk PUTs, and its fault list. */
  readonly endpoint: string;
  faults(): { add(rule: FaultRule): () => void; clear(): void };
  readonly chunk: number;
}

const cases: Case[] = [
  {
    name: 'gdrive',
    make: (waits, extra) =>
      new GDriveProvider({
        token: drive.accessToken,
        root: `retry-after/${randomBytes(4).toString('hex')}`,
        rootUrl: drive.url,
        chunkSize: 256 * KiB,
        sleep: async (ms) => void waits.push(ms),
        ...extra,
      }),
    endpoint: 'files.upload.resumable',
    faults: () => drive.faults,
    chunk: 256 * KiB,
  },
  {
    name: 'onedrive',
    make: (waits, extra) =>
      new OneDriveProvider({
        token: onedrive.accessToken,
        root: `retry-after/${randomBytes(4).toString('hex')}`,
        graphOrigin: onedrive.apiOrigin,
        fragmentSize: 320 * KiB,
        sleep: async (ms) => void waits.push(ms),
        ...extra,
      }),
    endpoint: 'uploadSession',
    faults: () => onedrive.faults,
    chunk: 320 * KiB,
  },
];

describe.each(cases)('$name chunk retries', (c) => {
  /** Upload a file of several chunks with `action` on the second chunk PUT; the waits seen. */
  async function uploadThrough(action: Action, extra?: { maxRetryAfterMs?: number }): Promise<number[]> {
    const waits: number[] = [];
    const p = c.make(waits, extra);
    const data = randomBytes(3 * c.chunk + 99);
    const faults = c.faults();
    faults.add({ endpoint: c.endpoint, method: 'PUT', nth: [1], action });
    try {
      await p.write('big.bin', data, { size: data.byteLength });
    } finally {
      faults.clear();
    }
    expect(sha(await collect(await p.read('big.bin')))).toBe(sha(data));
    return waits;
  }

  it('waits the Retry-After seconds of a 429', async () => {
    expect(await uploadThrough({ kind: 'status', status: 429, retryAfterSeconds: 7 })).toEqual([7000]);
  });

  it('waits until the Retry-After HTTP-date of a 503', async () => {
    const waits = await uploadThrough({
      kind: 'status',
      status: 503,
      retryAfterSeconds: 9,
      retryAfterForm: 'http-date',
    });
    expect(waits).toHaveLength(1);
    // An HTTP-date has whole seconds; time passes between the answer and its reading.
    expect(waits[0]).toBeGreaterThan(6000);
    expect(waits[0]).toBeLessThanOrEqual(9000);
  });

  it('caps a long Retry-After (default 60 s, or maxRetryAfterMs)', async () => {
    const long: Action = { kind: 'status', status: 429, retryAfterSeconds: 3600 };
    expect(await uploadThrough(long)).toEqual([60_000]);
    expect(await uploadThrough(long, { maxRetryAfterMs: 20_000 })).toEqual([20_000]);
  });

  it('backs off by itself when a 503 names no wait', async () => {
    expect(await uploadThrough({ kind: 'status', status: 503 })).toEqual([100]);
  });
});

describe('gdrive error classification', () => {
  it('reads a Retry-After HTTP-date as well as seconds', () => {
    const at = (v: string): number | undefined => {
      const e = classifyGDrive(
        { response: { status: 429, headers: { get: (n: string) => (n === 'retry-after' ? v : null) } } },
        'test',
      );
      expect(e).toBeInstanceOf(TransientError);
      return (e as TransientError).retryAfterMs;
    };
    expect(at('12')).toBe(12_000);
    const ms = at(new Date(Date.now() + 30_000).toUTCString());
    expect(ms).toBeGreaterThan(25_000);
    expect(ms).toBeLessThanOrEqual(30_000);
  });
});
