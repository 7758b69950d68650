// Delta benchmark. Headline: what the agent actually sends for an edit of a large file, end
// to end — a running agent (its own block-size choice, its own deflate, its own Eq. 2
// decision, the signature included) through a shaped link to a running proxy — beside
// `rsync -I -z --no-W` pushing the same version pair through a loopback rsync daemon over
// an identical link; both counted by the link (bench/delta-e2e.ts). Then, as a labelled
// reference only: @weft/rsync-wasm alone at the best block size chosen after the fact
// (an oracle the agent cannot be), and throughput beside rdiff.
//
//   npx tsx bench/delta.bench.ts            (from the repository root)
//
// WEFT_BENCH_MBIT (default 50) and WEFT_BENCH_RTT_MS (default 40) shape the link;
// WEFT_DELTA_EXTRA="next:15.0.2,15.0.3" adds another package's chain;
// WEFT_BENCH_REFERENCE=0 skips the reference tables.
// Needs `rsync` (and `rdiff` for the reference throughput). When they are missing and we
// run as root with apt-get, they are installed; otherwise their columns print "skip".
// Corpus: ../shared/corpus/npm-versions.sh (override with WEFT_CORPUS_SCRIPT), cached in
// .cache/corpus. Figures are printed, never asserted.
import { spawnSync } from 'node:child_process';
import { createReadStream, createWriteStream, existsSync, mkdirSync, statSync, writeFileSync } from 'node:fs';
import { chmod, readFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import { brotliCompressSync, deflateSync } from 'node:zlib';
import { collect, delta, patch, signature, suggestStrongLength } from '@weft/rsync-wasm';
import { openOldFile } from '@weft/rsync-wasm/node';
import { type E2eRow, runAgentChain } from './delta-e2e.ts';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const CACHE = join(ROOT, '.cache');
const WORK = join(CACHE, 'bench-delta');
const FIXED_BLOCK = 2048;
const CANDIDATES = [512, 1024, 2048, 4096, 8192, 16384, 32768, 65536];
const STRONG = 8;
const REPEAT = Number(process.env.BENCH_REPEAT ?? 5);
const VERSIONS = ['5.6.2', '5.6.3', '5.7.2', '5.7.3'];

function has(tool: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${tool}`]).status === 0;
}

function ensureTools(): { rsync: boolean; rdiff: boolean } {
  if ((!has('rsync') || !has('rdiff')) && process.getuid?.() === 0 && has('apt-get')) {
    console.error('installing rsync and rdiff with apt-get …');
    spawnSync('sh', ['-c', 'apt-get update -qq && apt-get install -y -qq rsync rdiff'], { stdio: 'ignore' });
  }
  return { rsync: has('rsync'), rdiff: has('rdiff') };
}

/** Versions of an npm package as uncompressed tarballs (downloaded once, cached). */
function corpusFiles(pkg: string, versions: readonly string[]): string[] | undefined {
  const script = process.env.WEFT_CORPUS_SCRIPT ?? resolve(ROOT, '../shared/corpus/npm-versions.sh');
  const dir = join(CACHE, 'corpus');
  const files = versions.map((v) => join(dir, `${pkg.replace(/\//g, '_')}-${v}.tar`));
  if (!files.every((f) => existsSync(f))) {
    if (!existsSync(script)) {
      console.error(`corpus script ${script} not found: skipping ${pkg}`);
      return undefined;
    }
    const run = spawnSync('bash', [script, dir, pkg, ...versions], {
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    if (run.status !== 0) {
      console.error(`corpus download failed: skipping ${pkg}`);
      return undefined;
    }
  }
  return files;
}

function corpusPairs(): Array<[string, string, string]> {
  const files = corpusFiles('typescript', VERSIONS);
  if (!files) return [];
  return VERSIONS.slice(1).map((v, i) => [`ts ${VERSIONS[i]}→${v}`, files[i] ?? '', files[i + 1] ?? '']);
}

/** 100 MB of seeded pseudo-random bytes, and a copy with 200 small edits. */
function syntheticPair(): [string, string, string] {
  const oldPath = join(WORK, 'synthetic-old.bin');
  const newPath = join(WORK, 'synthetic-new.bin');
  if (existsSync(oldPath) && existsSync(newPath)) return ['synthetic 100 MB, 200 edits', oldPath, newPath];
  const size = 100_000_000;
  const old = Buffer.alloc(size);
  let s = 0x9e3779b9;
  const next = (): number => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>>= 0);
  };
  for (let i = 0; i < size; i += 4) old.writeUInt32LE(next(), i);
  const edits = Array.from({ length: 200 }, () => ({
    at: next() % size,
    kind: next() % 3,
    len: 1 + (next() % 64),
  }));
  edits.sort((a, b) => a.at - b.at);
  const parts: Buffer[] = [];
  let cursor = 0;
  for (const e of edits) {
    if (e.at < cursor) continue;
    parts.push(old.subarray(cursor, e.at));
    const fresh = Buffer.alloc(e.len);
    for (let i = 0; i < e.len; i++) fresh[i] = next() & 0xff;
    if (e.kind === 0) {
      parts.push(fresh); // insert
      cursor = e.at;
    } else if (e.kind === 1) {
      cursor = Math.min(size, e.at + e.len); // delete
    } else {
      parts.push(fresh); // replace
      cursor = Math.min(size, e.at + e.len);
    }
  }
  parts.push(old.subarray(cursor));
  writeFileSync(oldPath, old);
  writeFileSync(newPath, Buffer.concat(parts));
  return ['synthetic 100 MB, 200 edits', oldPath, newPath];
}

function stream(path: string): AsyncIterable<Uint8Array> {
  return createReadStream(path, { highWaterMark: 1 << 20 });
}

/**
 * Best-of-REPEAT seconds for ours and, when given, the other tool. Their runs alternate, so
 * load from other processes on a shared machine hits both alike.
 */
async function best(ours: () => Promise<void> | void, theirs?: () => number): Promise<[number, number]> {
  const fastest = [Infinity, Infinity];
  for (let i = 0; i < REPEAT; i++) {
    const t0 = cpuSeconds();
    await ours();
    fastest[0] = Math.min(fastest[0] ?? Infinity, cpuSeconds() - t0);
    if (theirs) fastest[1] = Math.min(fastest[1] ?? Infinity, theirs());
  }
  return [fastest[0] ?? NaN, theirs ? (fastest[1] ?? NaN) : NaN];
}

/** CPU seconds of this process, all threads (file I/O runs in libuv's pool). */
function cpuSeconds(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1e6;
}

/** Runs a command and returns its CPU seconds (user + system), from the shell's `times`. */
function cpuOf(cmd: string, args: string[]): number {
  const quoted = [cmd, ...args].map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(' ');
  const out = sh('bash', ['-c', `${quoted} >/dev/null || exit 1; times`]);
  const children = out.trim().split('\n').at(-1) ?? '';
  const [user = 0, system = 0] = [...children.matchAll(/(\d+)m([\d.]+)s/g)].map(
    (m) => Number(m[1]) * 60 + Number(m[2]),
  );
  return user + system;
}

function sh(cmd: string, args: string[]): string {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed: ${r.stderr}`);
  return r.stdout;
}

/** rsync old→new over a pipe that rsync treats as remote (so -z really compresses). */
async function rsyncBytes(oldPath: string, newPath: string, compress: boolean): Promise<number> {
  const shim = join(WORK, 'local-rsh.sh');
  writeFileSync(shim, '#!/bin/sh\nshift\nexec "$@"\n');
  await chmod(shim, 0o755);
  const dest = join(WORK, 'rsync-dest');
  mkdirSync(dest, { recursive: true });
  const target = join(dest, 'file');
  writeFileSync(target, await readFile(oldPath));
  const args = ['--no-whole-file', '--stats', '--ignore-times', '-e', shim];
  if (compress) args.push('-z');
  const out = sh('rsync', [...args, newPath, `localhost:${target}`]);
  const sent = /Total bytes sent:\s*([\d,.]+)/.exec(out)?.[1];
  const received = /Total bytes received:\s*([\d,.]+)/.exec(out)?.[1];
  if (!sent || !received) throw new Error(`cannot parse rsync --stats:\n${out}`);
  return Number(sent.replace(/[,.]/g, '')) + Number(received.replace(/[,.]/g, ''));
}

interface Row {
  [column: string]: string;
}

function printTable(title: string, rows: Row[]): void {
  const columns = Object.keys(rows[0] ?? {});
  const widths = columns.map((c) => Math.max(c.length, ...rows.map((r) => (r[c] ?? '').length)));
  const line = (cells: string[]): string =>
    `| ${cells.map((c, i) => c.padStart(widths[i] ?? 0)).join(' | ')} |`;
  console.log(`\n${title}\n`);
  console.log(line(columns));
  console.log(`|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`);
  for (const r of rows) console.log(line(columns.map((c) => r[c] ?? '')));
}

const kb = (n: number): string => `${(n / 1024).toFixed(1)}K`;
const mbps = (bytes: number, seconds: number): string => (bytes / 1e6 / seconds).toFixed(0);

interface Wire {
  bs: number;
  sig: number;
  delta: number;
  deflate: number;
  brotli: number;
}

/** Wire bytes at one block size, with the strong-hash length rsync would choose (2 B here). */
async function wire(oldPath: string, newPath: string, blockSize: number): Promise<Wire> {
  const strongLength = suggestStrongLength(statSync(oldPath).size, blockSize);
  const sig = await collect(signature(stream(oldPath), { blockSize, strongLength }));
  const d = await collect(delta(sig, stream(newPath)));
  return {
    bs: blockSize,
    sig: sig.length,
    delta: d.length,
    deflate: deflateSync(d, { level: 6 }).length,
    brotli: brotliCompressSync(d).length,
  };
}

/** The headline: agent → shaped link → proxy, beside rsync over the same link. */
async function headline(): Promise<void> {
  const link = {
    bitsPerSecond: Number(process.env.WEFT_BENCH_MBIT ?? 50) * 1e6,
    latencyMs: Number(process.env.WEFT_BENCH_RTT_MS ?? 40) / 2,
  };
  const chains: { name: string; pkg: string; versions: string[] }[] = [
    { name: 'typescript', pkg: 'typescript', versions: VERSIONS },
  ];
  for (const spec of (process.env.WEFT_DELTA_EXTRA ?? '').split(';').filter(Boolean)) {
    const [pkg = '', list = ''] = spec.split(':');
    chains.push({ name: pkg.replace(/\//g, '_'), pkg, versions: list.split(',') });
  }
  const rows: E2eRow[] = [];
  const notes: string[] = [];
  for (const c of chains) {
    const files = corpusFiles(c.pkg, c.versions);
    if (!files) continue;
    console.error(`… agent chain ${c.pkg} ${c.versions.join(' → ')}`);
    const r = await runAgentChain(
      c.name,
      c.versions.map((v, i) => ({ label: v, file: files[i] ?? '' })),
      link,
    );
    rows.push(...r.rows);
    notes.push(...r.notes);
  }
  if (rows.length === 0) return;
  printTable(
    `HEADLINE — what the agent sends for an edit, end to end (agent → ` +
      `${link.bitsPerSecond / 1e6} Mbit/s, ${2 * link.latencyMs} ms RTT link → proxy), beside ` +
      '`rsync -I -z --no-W` of the same pair through a loopback rsync daemon over an identical link. ' +
      'B = bytes counted by the link, both directions, whole sync pass (requests, responses, ' +
      'signature, delta). A edits a version it uploaded; then B and A edit versions that came ' +
      'down to them (sig from: own = kept from that upload or download; server = fetched first, ' +
      'when none was kept). "weft down" is the other ' +
      "device's delta download (its signature up, the delta down). block = signature block size " +
      '(up: the signature used; down: the one sent). γ̂ = Eq. 2 estimate before the delta.',
    rows as unknown as Row[],
  );
  for (const n of notes) console.log(`  ${n}`);
}

async function main(): Promise<void> {
  mkdirSync(WORK, { recursive: true });
  const tools = ensureTools();
  if (!tools.rsync) console.error('rsync not installed: rsync columns skipped (apt-get install rsync)');
  if (!tools.rdiff) console.error('rdiff not installed: rdiff columns skipped (apt-get install rdiff)');
  if (tools.rsync) await headline();
  else console.error('rsync not installed: the headline (agent beside rsync) is skipped');
  if (process.env.WEFT_BENCH_REFERENCE === '0') return;
  const pairs = [...corpusPairs(), syntheticPair()];
  const rows: Row[] = [];
  for (const [name, oldPath, newPath] of pairs) {
    console.error(`… ${name}`);
    const newSize = statSync(newPath).size;
    const oldSize = statSync(oldPath).size;
    const all: Wire[] = [];
    for (const bs of CANDIDATES) all.push(await wire(oldPath, newPath, bs));
    const fixed = all.find((w) => w.bs === FIXED_BLOCK) ?? (await wire(oldPath, newPath, FIXED_BLOCK));
    const pick = (cost: (w: Wire) => number): Wire => all.reduce((a, b) => (cost(b) < cost(a) ? b : a));
    const bestTotal = pick((w) => w.sig + w.brotli);
    const bestTotalDeflate = pick((w) => w.sig + w.deflate);
    const bestDelta = pick((w) => w.brotli);
    const rsyncPlain = tools.rsync ? await rsyncBytes(oldPath, newPath, false) : NaN;
    const rsyncZ = tools.rsync ? await rsyncBytes(oldPath, newPath, true) : NaN;

    // Throughput, same files, same block size and strong-hash length for both tools.
    const sigFile = join(WORK, 'ours.sig');
    const deltaFile = join(WORK, 'ours.delta');
    const outFile = join(WORK, 'ours.out');
    const rs = join(WORK, 'rdiff.sig');
    const rdl = join(WORK, 'rdiff.delta');
    const ro = join(WORK, 'rdiff.out');
    const rdiff = (args: string[]) => (tools.rdiff ? () => cpuOf('rdiff', ['-f', ...args]) : undefined);
    const [tSig, rdSig] = await best(
      () =>
        pipeline(
          Readable.from(signature(stream(oldPath), { blockSize: FIXED_BLOCK, strongLength: STRONG })),
          createWriteStream(sigFile),
        ),
      rdiff(['-b', String(FIXED_BLOCK), '-S', String(STRONG), 'signature', oldPath, rs]),
    );
    const sigBytes = await readFile(sigFile);
    const [tDelta, rdDelta] = await best(
      () => pipeline(Readable.from(delta(sigBytes, stream(newPath))), createWriteStream(deltaFile)),
      rdiff(['delta', rs, newPath, rdl]),
    );
    const [tPatch, rdPatch] = await best(
      async () => {
        const old = await openOldFile(oldPath);
        try {
          await pipeline(Readable.from(patch(old, stream(deltaFile))), createWriteStream(outFile));
        } finally {
          await old.close();
        }
      },
      rdiff(['patch', oldPath, rdl, ro]),
    );
    if (!(await readFile(outFile)).equals(await readFile(newPath))) {
      throw new Error(`${name}: patch output differs`);
    }
    const rd = { sig: rdSig, delta: rdDelta, patch: rdPatch };
    const ratio = (a: number, b: number): string => (Number.isFinite(b) ? (a / b).toFixed(2) : 'skip');
    const rate = (bytes: number, ours: number, theirs: number): string =>
      `${mbps(bytes, ours)} / ${Number.isFinite(theirs) ? mbps(bytes, theirs) : 'skip'}`;
    const rawBest = pick((w) => w.sig + w.delta);
    rows.push({
      pair: name,
      'new MB': (newSize / 1e6).toFixed(1),
      [`sig+Δ br @${FIXED_BLOCK}`]: kb(fixed.sig + fixed.brotli),
      'sig+Δ br best': `${kb(bestTotal.sig + bestTotal.brotli)} @${bestTotal.bs}`,
      'sig+Δ defl best': `${kb(bestTotalDeflate.sig + bestTotalDeflate.deflate)} @${bestTotalDeflate.bs}`,
      'sig+Δ raw best': `${kb(rawBest.sig + rawBest.delta)} @${rawBest.bs}`,
      [`Δ br @${FIXED_BLOCK}`]: kb(fixed.brotli),
      'Δ br best': `${kb(bestDelta.brotli)} @${bestDelta.bs}`,
      rsync: Number.isFinite(rsyncPlain) ? kb(rsyncPlain) : 'skip',
      'rsync -z': Number.isFinite(rsyncZ) ? kb(rsyncZ) : 'skip',
      'sig+Δ br / rsync -z': ratio(bestTotal.sig + bestTotal.brotli, rsyncZ),
      'Δ br / rsync -z': ratio(bestDelta.brotli, rsyncZ),
      'sig MB/s ours / rdiff': rate(oldSize, tSig, rd.sig),
      'Δ MB/s ours / rdiff': rate(newSize, tDelta, rd.delta),
      'Δ ours / rdiff': ratio(rd.delta, tDelta),
      'patch MB/s ours / rdiff': rate(newSize, tPatch, rd.patch),
    });
  }
  printTable(
    'REFERENCE ONLY (not what the agent sends: an oracle picks the best block size after the fact, ' +
      'brotli is not on the wire) — ' +
      `rsync-wasm vs rsync ${tools.rsync ? '' : '(skipped) '}and rdiff ${tools.rdiff ? '' : '(skipped) '}` +
      '— bytes on the wire (K = KiB; br = brotli, defl = deflate level 6 as in rsync -z; strong hash ' +
      'as rsync sizes it; best over blocks 512 B–64 KiB) and throughput (MB of input per CPU-second, block ' +
      `${FIXED_BLOCK} B, strong hash ${STRONG} B for both tools, best of ${REPEAT} alternating runs)`,
    rows,
  );
}

await main();
