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
 */
import { Worker } from 'node:worker_threads';
import { PACK_DEFLATE_LEVEL, PACK_PROBE_BYTES, type PackCompressionCode } from '@weft/wire';

/** A content as a pack stores it. */
export interface StoredForm {
  readonly bytes: Uint8Array;
  readonly compression: PackCompressionCode;
}

const WORKER_SOURCE = `
const { deflateRawSync } = require('node:zlib');
const { parentPort, workerData } = require('node:worker_threads');
const { probeBytes, level } = workerData;
function form(raw) {
  if (raw.byteLength > 2 * probeBytes) {
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
    r = form(m.raw);
  } catch (e) {
    r = { error: String(e && e.message) };
  }
  parentPort.postMessage({ id: m.id, ...r });
});
`;

type Reply = { id: number } & (
  { compression: 0 } | { compression: 1; bytes: Uint8Array } | { error: string }
);

let worker: Worker | undefined;
let nextId = 0;
const waiting = new Map<
  number,
  { raw: Uint8Array; resolve: (f: StoredForm) => void; reject: (e: Error) => void }
>();

function start(): Worker {
  if (worker) return worker;
  const w = new Worker(WORKER_SOURCE, {
    eval: true,
    workerData: { probeBytes: PACK_PROBE_BYTES, level: PACK_DEFLATE_LEVEL },
  });
  w.unref();
  w.on('message', (r: Reply) => {
    const x = waiting.get(r.id);
    waiting.delete(r.id);
    if (waiting.size === 0) w.unref();
    if (!x) return;
    if ('error' in r) x.reject(new Error(`pack deflate: ${r.error}`));
    else if (r.compression === 1) x.resolve({ bytes: new Uint8Array(r.bytes), compression: 1 });
    else x.resolve({ bytes: x.raw, compression: 0 });
  });
  const fail = (e: Error): void => {
    if (worker === w) worker = undefined;
    const all = [...waiting.values()];
    waiting.clear();
    for (const x of all) x.reject(e);
  };
  w.on('error', fail);
  w.on('exit', (code) => fail(new Error(`pack deflate worker exited (${code})`)));
  worker = w;
  return w;
}

/** `raw` as a pack stores it (packStoredForm's rule), worked out in the worker thread. */
export function storedFormOffThread(raw: Uint8Array): Promise<StoredForm> {
  // Too small to deflate: no round trip.
  if (raw.byteLength < 64) return Promise.resolve({ bytes: raw, compression: 0 });
  const w = start();
  const id = nextId++;
  return new Promise<StoredForm>((resolve, reject) => {
    waiting.set(id, { raw, resolve, reject });
    if (waiting.size === 1) w.ref();
    // A copy of its own, moved to the worker: a view's whole buffer (a bundle's, MiBs) would
    // be cloned with it otherwise.
    const copy = new Uint8Array(raw);
    w.postMessage({ id, raw: copy }, [copy.buffer]);
  });
}
