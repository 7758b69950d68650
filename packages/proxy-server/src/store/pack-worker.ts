/**
 * The stored form of a pack entry (@weft/wire packStoredForm: deflated or not) worked out in
 * a worker thread (issue #16): deflating each small file took ~20 % of the proxy's one event
 * loop during a small-file drop (1.3 of 5.5 CPU-s for 10,029 files). The packer asks for a
 * content's form as it reads the content ahead of the builder (packs.ts), so the deflate of
 * the next files runs beside the event loop instead of on it.
 *
 * The worker's code is plain JavaScript given as a string (`eval`: the same under tsx,
 * vitest and a build), the same rule as packStoredForm with its constants passed in;
 * `test/pack-worker.test.ts` checks both give the same bytes. One worker, started on first
 * use, unref'd while idle (it never keeps a process alive).
 *
 * The contents asked for in one turn of the event loop go to the worker in one message (one
 * buffer, moved, not cloned), up to BATCH_BYTES: one message per file cost the proxy's loop
 * ~20 µs a file (0.6 of 2.2 CPU-s of packing in a 30,000-file drop; issue #16).
 */
import { Worker } from 'node:worker_threads';
import { PACK_DEFLATE_LEVEL, PACK_NOISE_BITS, PACK_PROBE_BYTES, type PackCompressionCode } from '@weft/wire';

/** A content as a pack stores it. */
export interface StoredForm {
  readonly bytes: Uint8Array;
  readonly compression: PackCompressionCode;
}

/** A batch is sent at once when it holds this many bytes (else at the end of the turn). */
const BATCH_BYTES = 1024 * 1024;

const WORKER_SOURCE = `
const { deflateRawSync } = require('node:zlib');
const { parentPort, workerData } = require('node:worker_threads');
const { probeBytes, level, noiseBits } = workerData;
const cLogC = Float64Array.from({ length: probeBytes + 1 }, (_, c) => (c > 0 ? c * Math.log2(c) : 0));
const counts = new Int32Array(256);
function looksLikeNoise(probe) {
  const n = probe.byteLength;
  counts.fill(0);
  for (let i = 0; i < n; i++) counts[probe[i]]++;
  let sum = 0;
  for (let b = 0; b < 256; b++) sum += cLogC[counts[b]];
  return Math.log2(n) - sum / n >= noiseBits;
}
function form(raw) {
  if (raw.byteLength > 2 * probeBytes) {
    if (looksLikeNoise(raw.subarray(0, probeBytes))) return { compression: 0 };
    const probe = deflateRawSync(raw.subarray(0, probeBytes), { level: 1 });
    if (probe.byteLength > probeBytes - (probeBytes >> 4)) return { compression: 0 };
  }
  if (raw.byteLength >= 64) {
    const d = deflateRawSync(raw, { level });
    if (d.byteLength <= raw.byteLength - (raw.byteLength >> 3)) return { compression: 1, bytes: d };
  }
  return { compression: 0 };
}
parentPort.on('message', (m) => {
  let r;
  try {
    const forms = [];
    let at = 0;
    for (const n of m.lengths) {
      forms.push(form(m.buf.subarray(at, at + n)));
      at += n;
    }
    r = { forms };
  } catch (e) {
    r = { error: String(e && e.message) };
  }
  parentPort.postMessage({ id: m.id, ...r });
});
`;

type Form = { compression: 0 } | { compression: 1; bytes: Uint8Array };
type Reply = { id: number } & ({ forms: Form[] } | { error: string });
interface Asked {
  readonly raw: Uint8Array;
  readonly resolve: (f: StoredForm) => void;
  readonly reject: (e: Error) => void;
}

let worker: Worker | undefined;
let nextId = 0;
const waiting = new Map<number, Asked[]>();
/** Asked for in this turn, not sent yet. */
let batch: Asked[] = [];
let batchBytes = 0;
/** Messages sent to the worker (tests: a batch is one message). */
export const packWorkerStats = { messages: 0 };

function start(): Worker {
  if (worker) return worker;
  const w = new Worker(WORKER_SOURCE, {
    eval: true,
    workerData: { probeBytes: PACK_PROBE_BYTES, level: PACK_DEFLATE_LEVEL, noiseBits: PACK_NOISE_BITS },
  });
  w.unref();
  w.on('message', (r: Reply) => {
    const asked = waiting.get(r.id);
    waiting.delete(r.id);
    if (waiting.size === 0) w.unref();
    if (!asked) return;
    for (const [i, x] of asked.entries()) {
      const f = 'forms' in r ? r.forms[i] : undefined;
      if (!f) x.reject(new Error(`pack deflate: ${'error' in r ? r.error : 'no answer'}`));
      else if (f.compression === 1) x.resolve({ bytes: new Uint8Array(f.bytes), compression: 1 });
      else x.resolve({ bytes: x.raw, compression: 0 });
    }
  });
  const fail = (e: Error): void => {
    if (worker === w) worker = undefined;
    const all = [...waiting.values()].flat();
    waiting.clear();
    for (const x of all) x.reject(e);
  };
  w.on('error', fail);
  w.on('exit', (code) => fail(new Error(`pack deflate worker exited (${code})`)));
  worker = w;
  return w;
}

function send(): void {
  const asked = batch;
  batch = [];
  batchBytes = 0;
  if (asked.length === 0) return;
  let w: Worker;
  try {
    w = start();
  } catch (e) {
    for (const x of asked) x.reject(e instanceof Error ? e : new Error(String(e)));
    return;
  }
  const id = nextId++;
  waiting.set(id, asked);
  if (waiting.size === 1) w.ref();
  // One buffer of their own, moved to the worker: a view's whole buffer (a bundle's, MiBs)
  // would be cloned with it otherwise.
  let total = 0;
  for (const x of asked) total += x.raw.byteLength;
  const buf = new Uint8Array(total);
  const lengths: number[] = [];
  let at = 0;
  for (const x of asked) {
    buf.set(x.raw, at);
    at += x.raw.byteLength;
    lengths.push(x.raw.byteLength);
  }
  packWorkerStats.messages++;
  w.postMessage({ id, buf, lengths }, [buf.buffer]);
}

/** `raw` as a pack stores it (packStoredForm's rule), worked out in the worker thread. */
export function storedFormOffThread(raw: Uint8Array): Promise<StoredForm> {
  // Too small to deflate: no round trip.
  if (raw.byteLength < 64) return Promise.resolve({ bytes: raw, compression: 0 });
  return new Promise<StoredForm>((resolve, reject) => {
    batch.push({ raw, resolve, reject });
    batchBytes += raw.byteLength;
    if (batchBytes >= BATCH_BYTES) send();
    else if (batch.length === 1) setImmediate(send);
  });
}
