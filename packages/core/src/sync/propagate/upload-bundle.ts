/**
 * Propagation, local → remote, small files: queued puts packed into bundles of up to
 * MAX_BUNDLE_BYTES (docs/formats/bundle.md), compressed when it pays (CoCloud Eq. 3–4),
 * and the outcome of each file's write recorded with its queue entry in one transaction.
 */
import { createHash } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import {
  type BundleEntry,
  BUNDLE_OVERHEAD,
  MAX_BUNDLE_BYTES,
  type OpResult,
  bundleEntrySize,
  encodeBundleAsync,
  readAhead,
} from '@weft/wire';
import { openReadConfinedSync } from '../../confined-open.ts';
import { stated } from '../../decisions.ts';
import { JournalChanges } from '../../journal/changes.ts';
import type { Op } from '../../ops.ts';
import type { SyncContext } from '../context.ts';
import { BundleFlight } from './bundle-flight.ts';
import { noteServerConflict } from './conflict.ts';
import { ReadSlabs } from './read-slabs.ts';
import type { UploadRow } from '../../journal/journal.ts';
import type { RequestTiming } from '../../remote/remote-store.ts';
import { type UploadRead, readForUpload, readForUploadSync, scanHashHolds } from './upload-read.ts';

/** Files read ahead of the bundle being filled (each < 2 MiB: at most 32 MiB held). */
const READ_AHEAD = 16;

/**
 * Outcomes of one bundle recorded per transaction, with a turn of the event loop between
 * transactions: a 4 MiB bundle of ~500 small files recorded in one held the agent's UI for
 * hundreds of milliseconds on a loaded machine (issue #16), before the outcomes were written
 * a statement per kind of change. Fewer transactions, fewer commits: a 30k-file drop's profile
 * spent 0.5 s of 1.4 recording outcomes in commits at 64 a transaction, 0.2 s at 256 and 0.45 s
 * at 128 (single runs, load 6–12: noisy). A
 * transaction's median hold of the loop was 3.2 ms at 64, 4.0 at 128, 6.5 at 256; the longest
 * holds (42–194 ms) were single statements, the process descheduled under load. 128: half the
 * commits of 64, the UI's turns kept short.
 * Each file's outcome still leaves the queue with its effect in one transaction; a crash
 * between two only re-sends the rest, which the server recognises.
 */
export const OUTCOMES_PER_TRANSACTION = 128;

/**
 * Bundles on their way at once. Two: while the server writes and fsyncs one bundle's files,
 * the next crosses the link (on a 40 ms RTT link the server's work and the transfer took
 * turns; issue #16). Each holds distinct paths (a path on its way holds back the next use
 * of it), so their order on the server does not matter; outcomes are recorded as each returns.
 */
export const BUNDLES_IN_FLIGHT = 2;
/**
 * The least a bundle's link time counts as (s): its request less the server's time can come
 * out at nothing on loopback, and a rate sample needs a time.
 */
const MIN_LINK_SECONDS = 0.0005;
/** Bundles smaller than this on the wire take no rate sample (their time is mostly latency). */
export const MIN_RATE_SAMPLE_BYTES = 128 * 1024;

/**
 * Index rows read per journal query, ahead of the files that need them (their synced revision
 * and what the scan saw): one statement a file was ~3 % of a first sync's agent CPU (issue #16).
 */
export const ROWS_PER_QUERY = 256;

/**
 * Send the puts of `run` in bundles. The files are read ahead (several reads in flight), and
 * up to BUNDLES_IN_FLIGHT bundles are on their way while the next is filled: the reads, the
 * encoding, the transfer and the server's work overlap instead of taking turns (issue #16).
 * A path already in a bundle on its way waits for the outcomes of those on their way.
 * Returns the puts whose file had grown to ctx.small or more since it was queued (the
 * caller sends them as large files: push.ts sorts by the queued size, without a stat).
 */
export async function uploadBundles(
  ctx: SyncContext,
  run: readonly { id: number; op: Op }[],
  slabs = new ReadSlabs(),
  /** Asked before each bundle is sent: true stops there (what is not sent stays queued). */
  stopped: () => boolean = () => false,
  /**
   * Keep the last bundle when it is part-filled and at least one full one went: its puts stay
   * queued, to be sent with what is queued next (push.ts, while the scan goes on).
   */
  holdTail = false,
  /**
   * The bundles on their way, the push's across its windows (bundle-flight.ts): given, those
   * of this run may still be on their way when it returns — the caller settles them. Not
   * given, they are all answered and recorded before it returns.
   */
  shared?: BundleFlight,
): Promise<{ id: number; op: Op }[]> {
  const grown: { id: number; op: Op }[] = [];
  /** `trusted`: sent under its scan's hash (upload-read.ts). */
  let batch: { id: number; entry: BundleEntry; trusted: boolean }[] = [];
  let inBatch = new Set<string>();
  let bytes = BUNDLE_OVERHEAD;
  /** The bundles on their way, oldest first (each one's outcome recorded when it resolves). */
  const flight = shared ?? new BundleFlight();
  /** Set once stopped() said so (or the tail is held): nothing more is sent. */
  let stopping = false;
  let sentAny = false;
  const flush = async (): Promise<void> => {
    if (batch.length === 0 || stopping) return;
    if (stopped()) {
      stopping = true;
      return;
    }
    const current = batch;
    // The batch's own set of paths goes with the bundle on its way (not a second one built).
    const paths = inBatch;
    batch = [];
    inBatch = new Set();
    bytes = BUNDLE_OVERHEAD;
    while (flight.size >= BUNDLES_IN_FLIGHT) await flight.settleOldest();
    sentAny = true;
    // One array of the entries for the marks, the choice and the encoder (issue #16: an
    // object or array per file and use was garbage).
    const entries = current.map((b) => b.entry);
    ctx.journal.markSent(entries);
    const compress =
      shouldCompress(entries) &&
      ctx.compression.shouldCompress(
        current.map((b) => b.entry.content),
        ctx.uploadRate.rate,
      );
    // Deflated in zlib's thread pool, not on the event loop (issue #16); into a reused buffer,
    // given back once its request has settled (read-slabs.ts BundleBuffers).
    const into = slabs.bundles.take();
    let encoded: Uint8Array;
    try {
      encoded = await encodeBundleAsync(
        entries,
        // Paths from the scan (or the server's checked answers), hashes from createHash:
        // checked where they came in, not again per entry (the server checks them all).
        { compress, into, entriesChecked: true },
      );
    } catch (e) {
      slabs.bundles.give(into);
      throw e;
    }
    // The entries area holds a copy: the files' read buffers are used again (read-slabs.ts).
    for (const b of current) slabs.release(b.entry.content);
    // A request abandoned while its bytes were still being sent, then the buffer reused, can
    // only send a bundle whose CRC-32 trailer fails: the server takes nothing from it.
    const done = send(current, encoded, compress).finally(() => slabs.bundles.give(into));
    flight.add(
      done,
      paths,
      current.map((b) => b.id),
    );
  };
  const send = async (
    current: readonly { id: number; entry: BundleEntry; trusted: boolean }[],
    encoded: Uint8Array,
    compress: boolean,
  ): Promise<void> => {
    const started = performance.now();
    // Bundles on their way together share the link: each is timed as its share of it.
    const sharing = flight.size + 1;
    let results: Awaited<ReturnType<typeof ctx.client.uploadBundle>>;
    const timing: RequestTiming = {};
    try {
      results = await ctx.client.uploadBundle(encoded, timing);
    } catch (e) {
      // A bundle holding files sent under their scan's hash failed: whatever the cause (the
      // server refuses a whole bundle whose SHA-256 check fails), this process hashes every
      // file from now on, so a retry cannot meet that refusal again.
      if (current.some((b) => b.trusted)) ctx.scanHashes.distrust();
      throw e;
    }
    ctx.status.bundleSent(compress);
    // Built only when traced: an object per file otherwise made for nothing (issue #16).
    if (ctx.tracing)
      ctx.trace(
        'bundle',
        current.map((b, i) => ({
          path: b.entry.path,
          rev: b.entry.rev,
          sha: b.entry.sha256,
          result: results[i]?.result,
        })),
      );
    // The link's time: the request's less the server's own (its Server-Timing; issue #16). On
    // loopback a bundle's request is almost all the server's ingest, which neither compression
    // nor a delta shortens; counted as link time it made the link look as slow as the ingest
    // (~14 MB/s) and the compression choice flip between runs.
    // A small bundle's time is mostly latency, not bandwidth (a 659-byte bundle timed at the
    // floor below read as 1.3 MB/s and held the mean down for five samples): not sampled.
    const seconds = (performance.now() - started - (timing.serverMs ?? 0)) / 1000;
    if (encoded.byteLength >= MIN_RATE_SAMPLE_BYTES)
      ctx.uploadRate.add(encoded.byteLength, Math.max(MIN_LINK_SECONDS, seconds) / sharing);
    if (current.length > 1) ctx.status.save('requestsSavedByBundling', current.length - 1);
    // Every file's outcome leaves the queue with its effect, in bounded transactions.
    for (let start = 0; start < current.length; start += OUTCOMES_PER_TRANSACTION) {
      if (start > 0) await new Promise<void>((resolve) => setImmediate(resolve));
      const out = new JournalChanges();
      const uploaded: string[] = [];
      const end = Math.min(current.length, start + OUTCOMES_PER_TRANSACTION);
      for (let i = start; i < end; i++) {
        const b = current[i] as (typeof current)[number];
        putOutcome(ctx, b.id, b.entry.path, b.entry.sha256, results[i]?.result, undefined, uploaded, out);
      }
      ctx.commit(out);
      // The status changes once for these files, not once per file.
      ctx.status.activities(uploaded.map((path) => ({ kind: 'uploaded', path })));
    }
    ctx.status.update({ bytesUploaded: ctx.status.get().bytesUploaded + encoded.byteLength });
  };
  // The file may sit elsewhere now: a folder above it moved after the put was queued
  // (offline: mkdir D, put D/f, move D→E). Its content goes up under the queued path,
  // and the queued move then carries it. Undefined: gone since (the scanner queues its delete).
  type Put = { id: number; op: Extract<Op, { kind: 'put' }> };
  const gate = ctx.paths.gate;
  const alloc = (size: number): Buffer => slabs.alloc(size);
  const release = (b: Buffer): void => slabs.release(b);
  const read = async (q: Put): Promise<{ q: Put; got: UploadRead | undefined; moved: boolean }> => {
    try {
      const where = ctx.journal.whereNow(q.id, q.op.path);
      // On the event loop while reads are quick (loop-gate.ts, issue #16): opened confined in
      // one step where the platform allows (confined-open.ts), else resolved (ctx.at: a
      // realpath) and opened.
      let got: UploadRead;
      if (gate.onLoop()) {
        const fd = openReadConfinedSync(ctx.paths, where);
        const file = fd ?? (await ctx.at(where));
        const t = performance.now();
        try {
          got = readForUploadSync(file, q.op.size, alloc, release);
        } finally {
          gate.took(performance.now() - t);
        }
      } else got = await readForUpload(await ctx.at(where), q.op.size, alloc, release);
      return { q, got, moved: where !== q.op.path };
    } catch {
      return { q, got: undefined, moved: false };
    }
  };
  const puts = run.filter((x): x is Put => x.op.kind === 'put');
  // The scan's hash is checked against the folder's device (upload-read.ts).
  const folderDev = (await fsp.stat(ctx.paths.root, { bigint: true }).catch(() => undefined))?.dev;
  /** Index rows of the puts before rowsTo, read ROWS_PER_QUERY at a time. */
  let rows = new Map<string, UploadRow>();
  /** Contents sent to those paths whose answer never came (journal.unanswered), read with them. */
  let unanswered = new Map<string, string[]>();
  let rowsTo = 0;
  /** Paths put in a bundle by this call: met again, their row is read again (after its outcome). */
  const bundled = new Set<string>();
  let index = 0;
  try {
    for await (const { q, got, moved } of readAhead(puts, READ_AHEAD, read)) {
      if (stopping) {
        if (got) slabs.release(got.content);
        break;
      }
      const at = index++;
      if (at >= rowsTo) {
        rowsTo = Math.min(puts.length, at + ROWS_PER_QUERY);
        const paths = puts.slice(at, rowsTo).map((p) => p.op.path);
        rows = ctx.journal.uploadRows(paths);
        unanswered = ctx.journal.unanswered(paths);
      }
      // A bundle holds a path once. The queue puts a path twice in one window no more (R10),
      // but a journal written before may still: the first goes, then the second on its base.
      if (inBatch.has(q.op.path)) await flush();
      if (flight.holds(q.op.path)) await flight.settle();
      if (got === undefined) {
        ctx.commit(new JournalChanges().completeOp(q.id)); // gone since: the scanner queues its delete
        continue;
      }
      const { content, stat } = got;
      if (content.byteLength >= ctx.small) {
        slabs.release(content);
        grown.push(q);
        continue;
      }
      // Met again in this upload: its row as the first one's outcome left it.
      const row = bundled.has(q.op.path)
        ? ctx.journal.uploadRows([q.op.path]).get(q.op.path)
        : rows.get(q.op.path);
      const trusted = scanHashHolds({
        op: q.op,
        movedSince: moved,
        hashedAfterMs: ctx.scanHashes.hashedAfter(q.op),
        row,
        bytesRead: content.byteLength,
        stat,
        folderDev,
      });
      if (trusted) ctx.scanHashes.trusted += 1;
      else ctx.scanHashes.hashed += 1;
      const sha256 = trusted ? q.op.hash : createHash('sha256').update(content).digest('hex');
      // Sent before and never answered (a crash): named, so the server takes it as ours.
      const own = unanswered.get(q.op.path);
      const entry: BundleEntry = {
        path: q.op.path,
        rev: row?.syncedRev ?? null,
        mtimeMs: Number(stat.mtimeMs),
        sha256,
        content,
        ...(own ? { own } : {}),
      };
      bundled.add(entry.path);
      const size = bundleEntrySize(entry.path, entry.rev, content.byteLength, entry.own?.length);
      if (bytes + size > MAX_BUNDLE_BYTES) await flush();
      batch.push({ id: q.id, entry, trusted });
      inBatch.add(entry.path);
      bytes += size;
    }
    if (holdTail && sentAny) stopping = true;
    await flush();
    if (stopping) for (const b of batch) slabs.release(b.entry.content);
  } catch (e) {
    await flight.settle().catch(() => undefined);
    throw e;
  }
  // Never return with a bundle's outcome unrecorded (its error, if any, is thrown here), unless
  // the caller keeps them (the push, across its windows).
  if (!shared) await flight.settle();
  return grown;
}

/**
 * The outcome of one file write on the server (any upload path ends here): the put leaves
 * the queue with its effect — the journal changes returned, to be recorded in one
 * transaction — and the status and the decision table hear of it.
 */
export function putOutcome(
  ctx: SyncContext,
  opId: number,
  p: string,
  sha: string,
  r: OpResult | undefined,
  signature?: { bytes: Buffer; block: number },
  /** Given: an applied write's path goes here, for the caller to record as activity with others. */
  uploaded?: string[],
  /** Given: the changes are added to it (a bundle's outcomes: no list of their own per file). */
  into?: JournalChanges,
): JournalChanges {
  const out = (into ?? new JournalChanges()).completeOp(opId).clearSent(p);
  if (ctx.tracing) ctx.trace('outcome', { path: p, sha, result: r });
  // The synced columns of its row (when it has one), not a whole row read and written back.
  if (r?.status === 'applied' && r.entry) {
    out.setSynced(
      p,
      r.entry.revision,
      r.entry.sha256 ?? sha,
      signature?.bytes ?? null,
      signature?.block ?? null,
    );
    // Its echo in the feed would change nothing: a pull steps over it (own-changes.ts).
    ctx.ownChanges.note(r.seq);
  }
  if (r?.status === 'error') ctx.status.activity({ kind: 'error', path: p, detail: r.error.message });
  if (r?.status === 'error') {
    const d = ctx.decide(stated(p, 'refused'), { code: r.error.code });
    if (d.action === 'reconcile') ctx.control.reconcileEverything();
  }
  if (r?.status === 'applied') {
    if (uploaded) uploaded.push(p);
    else ctx.status.activity({ kind: 'uploaded', path: p });
  }
  if (r?.status === 'conflict')
    noteServerConflict(ctx, { kind: 'put', path: p, hash: sha, size: 0, created: false }, r);
  return out;
}

/** Compress bundles of text-like files; already-compressed formats are sent as they are. */
function shouldCompress(entries: readonly { readonly path: string }[]): boolean {
  let compressible = 0;
  for (const e of entries) if (!PACKED.test(e.path)) compressible += 1;
  return compressible * 2 >= entries.length;
}

const PACKED =
  /\.(zip|gz|tgz|bz2|xz|zst|7z|rar|jpe?g|png|gif|webp|heic|mp[34]|m4a|mov|avi|mkv|pdf|docx|xlsx|pptx)$/i;
