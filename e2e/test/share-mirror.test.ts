/**
 * A share kept by four members on four clouds — Dropbox, Google Drive and OneDrive (the
 * emulators, through the real SDK-based adapters) and Weft storage (the proxy's own store,
 * object tier on s3proxy) — served by the proxy: accounts connected, the share created,
 * invitations made and accepted through the proxy's share API (two members join a share
 * that already runs, so they are seeded from it), and the proxy's mirror engine between
 * them (Dropbox watched by list_folder/longpoll, the Weft member by the proxy's own feed).
 * Random operations (create, edit, rename, move folder, delete) are made directly through
 * each cloud's API by a second client per member (as a person using the cloud's web UI or
 * app would) and through the proxy's file API for the Weft member, while the mirror runs;
 * every emulator answers 5 % of requests with 429 or 503 (deterministic, by request
 * count); the proxy is restarted half-way. When activity stops, the four trees are
 * identical by content hash, and every version written anywhere is present in place or as
 * a conflicted copy, unless its writer's member later deleted it.
 *
 * CI: fixed seed, 60 operations. WEFT_FULL=1: 5 minutes of operations (WEFT_SEED to vary).
 * WEFT_DEBUG=1 prints the proxy's log at trace level, the mirror's entries among it, and
 * each person's operation (and, when a run fails, every request each cloud received).
 * Half the folder deletes are made as the clouds' apps make them — moved to a trash outside
 * the share with whatever is in it, what went there counting as deleted by that member —
 * the other half remove the files the person read, then the folder if empty;
 * WEFT_TRASH_DELETES=1 makes them all trash-style.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { DropboxEmulator } from '@weft/cloud-emulators/dropbox';
import { GDriveEmulator } from '@weft/cloud-emulators/gdrive';
import { OneDriveEmulator } from '@weft/cloud-emulators/onedrive';
import { sharedLocalCertificate } from '@weft/cloud-emulators/tls';
import type { EmulatorServer } from '@weft/cloud-emulators';
import { ProxyClient } from '@weft/core';
import {
  DropboxProvider,
  GDriveProvider,
  OneDriveProvider,
  type Provider,
  type Sleep,
  WRAP_DEFAULTS,
  type WrapConfig,
  collect,
  hasServerSideMove,
  wrapProvider,
} from '@weft/providers';
import { type ProxyConfigInput, type RunningProxyServer, startProxyServer } from '@weft/proxy-server';
import { WeftPersonProvider, allLines, fileHashes, prng, trustCaForFetch } from '../src/share-harness.ts';

const FULL = process.env.WEFT_FULL === '1';
const SEED = Number(process.env.WEFT_SEED ?? 20261121);
/** WEFT_SHARE_MS: run operations for this long instead of a count (the bench's random-seed runs). */
const SHARE_MS = process.env.WEFT_SHARE_MS ? Number(process.env.WEFT_SHARE_MS) : undefined;
const OPS = FULL || SHARE_MS ? Number.POSITIVE_INFINITY : Number(process.env.WEFT_SHARE_OPS ?? 60);
const DURATION_MS = FULL ? 5 * 60_000 : (SHARE_MS ?? Number.POSITIVE_INFINITY);

/** Retry-After is honoured but capped, so injected throttling does not stretch the run. */
const fastSleep: Sleep = (ms, signal) =>
  new Promise((resolve, reject) => {
    const t = setTimeout(resolve, Math.min(ms, 25));
    signal?.addEventListener('abort', () => {
      clearTimeout(t);
      reject(new Error('aborted'));
    });
  });
const retry = { maxAttempts: 12, sleep: fastSleep, random: () => 0.5 };

/** The mirror's wrappers inside the proxy: the defaults, with fast retries and CI-sized pacing. */
function mirrorWrap(cloud: string): WrapConfig {
  const base = WRAP_DEFAULTS[cloud === 'weft' ? 'memory' : cloud] ?? {};
  const fast =
    cloud === 'gdrive' || cloud === 'onedrive' ? { pacer: { requestsPerSecond: 100, burst: 100 } } : {};
  return { ...base, ...fast, retry };
}

interface Member {
  readonly name: string;
  readonly user: string;
  /** A separate client of the same account: the person editing directly. */
  readonly person: Provider;
  readonly root: string;
  readonly emulator?: EmulatorServer;
}

function under(root: string, rel: string): string {
  return root === '' ? rel : rel === '' ? root : `${root}/${rel}`;
}

describe('cross-cloud share served by the proxy: Dropbox, Drive, OneDrive and Weft storage converge', () => {
  const emulators: EmulatorServer[] = [];
  const members: Member[] = [];
  const tokens = new Map<string, string>();
  let stateDir = '';
  let config: ProxyConfigInput = {};
  let server: RunningProxyServer | undefined;
  const start = async (): Promise<RunningProxyServer> =>
    (server = await startProxyServer(config, {
      // WEFT_DEBUG=1: the mirror's trace (every entry ingested and applied) on stderr.
      logger: process.env.WEFT_DEBUG
        ? pino({ level: 'trace' }, pino.destination(2))
        : pino({ level: 'silent' }),
      shares: { wrap: mirrorWrap },
    }));
  const api = async <T>(user: string, method: string, path: string, body?: unknown): Promise<T> => {
    const res = await fetch(`${server?.url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${tokens.get(user)}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
    return (text ? JSON.parse(text) : undefined) as T;
  };

  beforeAll(async () => {
    const tls = sharedLocalCertificate();
    await trustCaForFetch(tls.ca);
    const dbx = await new DropboxEmulator({ longpollTimeScale: 0.02 }).start();
    const gd = await new GDriveEmulator().start();
    const od = await new OneDriveEmulator({ tls: { cert: tls.cert, key: tls.key } }).start();
    emulators.push(dbx, gd, od);
    const s3 = inject('s3');
    stateDir = await mkdtemp(join(tmpdir(), 'weft-share-'));
    config = {
      dataDir: stateDir,
      gcIntervalMs: 0,
      objectTier: {
        type: 's3',
        bucket: s3.bucket,
        prefix: `share-${randomBytes(4).toString('hex')}/`,
        endpoint: s3.endpoint,
        region: s3.region,
        forcePathStyle: s3.forcePathStyle,
        accessKeyId: s3.accessKeyId,
        secretAccessKey: s3.secretAccessKey,
      },
      shares: {
        enabled: true,
        pollIntervalMs: 100,
        longpollTimeoutSeconds: 30,
        notifyBatchMs: 50,
        oldKeys: {},
        endpoints: { dropbox: dbx.url, gdrive: gd.url, onedrive: od.apiOrigin },
        oauth: {},
      },
    };
    await start();
    for (const u of ['ann', 'ben', 'cat', 'dan'])
      tokens.set(u, (await (server as RunningProxyServer).enrol(u, 'laptop')).token);
    const person = (p: Provider) => wrapProvider(p, { retry, concurrency: 4 });
    let danClient: ProxyClient | undefined;
    const dan = (): ProxyClient => {
      if (!danClient || danClient.baseUrl !== server?.url)
        danClient = new ProxyClient({ baseUrl: server?.url ?? '', token: tokens.get('dan') ?? '' });
      return danClient;
    };
    members.push(
      {
        name: 'ann (dropbox)',
        user: 'ann',
        person: person(new DropboxProvider({ token: dbx.accessToken, baseUrl: dbx.url })),
        root: 'Team/share',
        emulator: dbx,
      },
      {
        name: 'ben (drive)',
        user: 'ben',
        person: person(new GDriveProvider({ token: gd.accessToken, rootUrl: gd.url })),
        root: 'share',
        emulator: gd,
      },
      {
        name: 'cat (onedrive)',
        user: 'cat',
        person: person(new OneDriveProvider({ token: od.accessToken, graphOrigin: od.apiOrigin })),
        root: 'Documents/share',
        emulator: od,
      },
      { name: 'dan (weft)', user: 'dan', person: person(new WeftPersonProvider(dan)), root: 'share' },
    );
  });

  afterAll(async () => {
    await server?.close();
    for (const e of emulators) await e.close();
    if (stateDir) await rm(stateDir, { recursive: true, force: true });
  });

  it('random direct edits on all four clouds under 429/503, with a proxy restart', async () => {
    const [ann, ben, cat, dan] = members as [Member, Member, Member, Member];
    const emu = emulators as [EmulatorServer, EmulatorServer, EmulatorServer];
    // Ann's folder has content before she shares it.
    await ann.person.write(under(ann.root, 'readme.txt'), Buffer.from('t-seed\n'));
    type Account = { id: string };
    const accountOf = async (m: Member, provider: string, token: string): Promise<Account> =>
      api<Account>(m.user, 'POST', '/v1/accounts', {
        provider,
        label: `${m.user}@example.com`,
        tokens: { accessToken: token },
      });
    const annAcc = await accountOf(ann, 'dropbox', emu[0].accessToken);
    const benAcc = await accountOf(ben, 'gdrive', emu[1].accessToken);
    const catAcc = await accountOf(cat, 'onedrive', emu[2].accessToken);
    const share = await api<{ id: string }>('ann', 'POST', '/v1/shares', {
      name: 'Team',
      replica: { cloud: 'account', accountId: annAcc.id, root: ann.root },
    });
    const join = async (m: Member, replica: unknown) => {
      const inv = await api<{ token: string }>('ann', 'POST', `/v1/shares/${share.id}/invites`, {});
      await api(m.user, 'POST', '/v1/shares/accept', { token: inv.token, replica });
    };
    await join(ben, { cloud: 'account', accountId: benAcc.id, root: ben.root });
    await (server as RunningProxyServer).shares?.quiesce(share.id);
    // Cat and Dan join a share that already runs: seeded from it.
    await join(cat, { cloud: 'account', accountId: catAcc.id, root: cat.root });
    await join(dan, { cloud: 'weft', root: dan.root });
    await (server as RunningProxyServer).shares?.quiesce(share.id);
    const listed = await api<{
      shares: { members: { member: string; cloud: string; seeding?: { done: boolean } }[] }[];
    }>('dan', 'GET', '/v1/shares');
    expect(listed.shares[0]?.members.map((m) => `${m.member}:${m.cloud}`)).toEqual([
      'ann:dropbox',
      'ben:gdrive',
      'cat:onedrive',
      'dan:weft',
    ]);
    expect(listed.shares[0]?.members.find((m) => m.member === 'dan')?.seeding?.done).toBe(true);
    for (const m of members)
      expect([...(await fileHashes(m.person, m.root)).keys()], m.name).toEqual(['readme.txt']);

    for (const e of emulators) {
      e.faults.add({ rate: 0.03, action: { kind: 'status', status: 429, retryAfterSeconds: 1 } });
      e.faults.add({ rate: 0.02, action: { kind: 'status', status: 503, retryAfterSeconds: 1 } });
    }

    const rnd = prng(SEED);
    const pick = <T>(xs: readonly T[]): T | undefined => xs[Math.floor(rnd() * xs.length)];
    const written = new Set<string>(['t-seed']);
    const origins = new Map<string, string>();
    const retired = new Set<string>();
    let token = 0;
    let fresh = 0;
    const counts: Record<string, number> = {};
    const count = (k: string) => void (counts[k] = (counts[k] ?? 0) + 1);
    /** WEFT_DEBUG=1: each person's operation, beside the proxy's trace. */
    const note = (m: Member, what: string, detail: string): void => {
      if (process.env.WEFT_DEBUG)
        process.stderr.write(`${JSON.stringify({ person: m.name, what, detail, time: Date.now() })}\n`);
    };

    const entries = async (m: Member) => {
      const out: { rel: string; kind: 'file' | 'dir'; revision: string }[] = [];
      for await (const e of m.person.list(m.root, { recursive: true })) {
        out.push({
          rel: m.root === '' ? e.path : e.path.slice(m.root.length + 1),
          kind: e.kind,
          revision: e.revision,
        });
      }
      return out;
    };
    /** Append a token to a file as a person would: read, then save if nobody saved meanwhile. */
    const edit = async (m: Member, rel: string): Promise<boolean> => {
      const path = under(m.root, rel);
      for (let attempt = 0; attempt < 5; attempt++) {
        let before = '';
        let rev: string | undefined;
        try {
          const st = await m.person.stat(path);
          if (st.kind !== 'file') return false;
          rev = st.revision;
          before = Buffer.from(await collect(await m.person.read(path))).toString('utf8');
        } catch {
          rev = undefined;
        }
        const t = `t${token++}`;
        try {
          await m.person.write(
            path,
            Buffer.from(`${before}${t}\n`),
            rev ? { ifRevision: rev } : { ifNotExists: true },
          );
          written.add(t);
          origins.set(t, `${m.name} ${rel} +${Date.now() - started}ms`);
          note(m, 'write', `${rel} ${t} over ${rev ?? 'nothing'}`);
          return true;
        } catch {
          // someone (the engine) saved meanwhile: look again
        }
      }
      return false;
    };
    const removeFile = async (m: Member, rel: string): Promise<void> => {
      const path = under(m.root, rel);
      const st = await m.person.stat(path);
      const text = Buffer.from(await collect(await m.person.read(path))).toString('utf8');
      await m.person.remove(path, { ifRevision: st.revision });
      note(m, 'remove', `${rel} ${text.split('\n').filter(Boolean).join(',')}`);
      for (const line of text.split('\n')) if (line) retired.add(line);
    };

    /**
     * Delete a folder the way the clouds' apps do: it goes to the trash (here a folder outside
     * the share) with whatever is in it at that moment. What went is what this member
     * deleted: read back from the trash (again after an injected fault: once moved, it is
     * deleted, whatever the reading meets), then the trash is emptied.
     */
    const trashFolder = async (m: Member, rel: string): Promise<Set<string>> => {
      const slash = m.root.lastIndexOf('/');
      const trash = `${slash < 0 ? '' : m.root.slice(0, slash + 1)}.trash-${fresh++}`;
      if (!hasServerSideMove(m.person)) throw new Error('setup: a trash needs server-side moves');
      await m.person.move(under(m.root, rel), trash);
      let gone: Set<string> | undefined;
      for (let attempt = 0; gone === undefined; attempt++) {
        try {
          gone = await allLines(m.person, trash);
        } catch (e) {
          if (attempt >= 50) throw e;
          await new Promise((r) => setTimeout(r, 20));
        }
      }
      for (const line of gone) retired.add(line);
      await m.person.remove(trash).catch(() => undefined); // outside the share either way
      return gone;
    };

    /** Cat's replica as the share API shows it to Ann (the owner), once `ok` holds. */
    const catReplica = async (
      ok: (r: { state: string; cause?: string; waiting: number } | undefined) => boolean,
    ): Promise<{ state: string; cause?: string; waiting: number }> => {
      for (const until = Date.now() + 60_000; ;) {
        const listed = await api<{
          shares: {
            members: { member: string; replica?: { state: string; cause?: string; waiting: number } }[];
          }[];
        }>('ann', 'GET', '/v1/shares');
        const r = listed.shares[0]?.members.find((m) => m.member === 'cat')?.replica;
        if (ok(r) && r) return r;
        if (Date.now() > until) throw new Error(`cat's replica: ${JSON.stringify(r)}`);
        await new Promise((res) => setTimeout(res, 100));
      }
    };
    const started = Date.now();
    let restarted = false;
    let statsBeforeRestart: object | undefined;
    // Cat's OneDrive is full (507 on every write: uploads, folders, moves, deletes; reads
    // work) from a third of the run to two thirds — across the proxy restart, longer than
    // any retry limit — then has room again. The share API shows her replica unavailable
    // meanwhile; nothing may be lost or rolled back once her outage log replays.
    const od = members.find((m) => m.user === 'cat')?.emulator;
    let fullUntil: (() => void)[] | undefined;
    let outageSeen: { state: string; cause?: string; waiting: number } | undefined;
    const progress = (n: number): number =>
      Number.isFinite(OPS) ? n / OPS : (Date.now() - started) / DURATION_MS;
    for (let n = 0; n < OPS && Date.now() - started < DURATION_MS; n++) {
      if (od && !fullUntil && !outageSeen && progress(n) >= 1 / 3) {
        fullUntil = ['PUT', 'PATCH', 'POST', 'DELETE'].map((method) =>
          od.faults.add({ method, action: { kind: 'status', status: 507, reason: 'quotaLimitReached' } }),
        );
        count('onedrive full');
      }
      if (fullUntil && progress(n) >= 2 / 3) {
        outageSeen = await catReplica((r) => r?.state === 'unavailable');
        for (const heal of fullUntil) heal();
        fullUntil = undefined;
      }
      if (!restarted && (n >= OPS / 2 || Date.now() - started >= DURATION_MS / 2)) {
        // The proxy goes down and comes back on the same data (a new port): the shares'
        // engines resume from their persisted cursors and log.
        const engineBefore = (server as RunningProxyServer).shares?.stats(share.id);
        await (server as RunningProxyServer).close();
        await start();
        statsBeforeRestart = engineBefore;
        restarted = true;
        count('proxy restart');
      }
      const m = pick(members) as Member;
      const all = await entries(m).catch(() => []);
      const files = all.filter((e) => e.kind === 'file');
      const dirs = all.filter((e) => e.kind === 'dir');
      const r = rnd();
      try {
        if (r < 0.3) {
          const dir = pick(['', '', 'notes', 'notes/old', 'media']) ?? '';
          if (await edit(m, under(dir, `f${Math.floor(rnd() * 6)}.txt`))) count('create/edit');
        } else if (r < 0.6) {
          const f = pick(files);
          if (f && (await edit(m, f.rel))) count('edit');
        } else if (r < 0.72) {
          const f = pick(files);
          if (!f) continue;
          const slash = f.rel.lastIndexOf('/');
          const to = `${slash < 0 ? '' : f.rel.slice(0, slash + 1)}r${fresh++}.txt`;
          note(m, 'rename', `${f.rel} -> ${to}`);
          if (hasServerSideMove(m.person)) await m.person.move(under(m.root, f.rel), under(m.root, to));
          else {
            const data = await collect(await m.person.read(under(m.root, f.rel)));
            await m.person.write(under(m.root, to), data, { ifNotExists: true });
            await m.person.remove(under(m.root, f.rel));
          }
          count('rename');
        } else if (r < 0.8) {
          const d = pick(dirs);
          if (!d || !hasServerSideMove(m.person)) continue;
          note(m, 'move folder', `${d.rel} -> moved${fresh}`);
          await m.person.move(under(m.root, d.rel), under(m.root, `moved${fresh++}`));
          count('move folder');
        } else if (r < 0.92) {
          const f = pick(files);
          if (!f) continue;
          await removeFile(m, f.rel);
          count('delete file');
        } else {
          const d = pick(dirs);
          if (!d) continue;
          // Half the folder deletes as the clouds' apps make them (WEFT_TRASH_DELETES=1: all).
          const trashStyle = process.env.WEFT_TRASH_DELETES === '1' || rnd() < 0.5;
          if (trashStyle && hasServerSideMove(m.person)) {
            // A folder delete as the clouds' apps make it: into the trash, whatever is in it.
            const gone = await trashFolder(m, d.rel);
            note(m, 'trash folder', `${d.rel} ${[...gone].join(',')}`);
          } else {
            // What the person sees inside goes, then the folder if empty.
            for (const f of files.filter((e) => e.rel.startsWith(d.rel + '/'))) await removeFile(m, f.rel);
            const left = (await entries(m)).filter((e) => e.kind === 'file' && e.rel.startsWith(d.rel + '/'));
            if (left.length > 0) note(m, 'delete folder', `${d.rel} kept (not empty)`);
            else if (hasServerSideMove(m.person)) {
              // The folder goes with whatever landed in it since that look (the mirror may
              // have written there): through the trash, so what went is known.
              const gone = await trashFolder(m, d.rel);
              note(m, 'delete folder', `${d.rel} removed ${[...gone].join(',')}`);
            } else {
              await m.person.remove(under(m.root, d.rel));
              note(m, 'delete folder', `${d.rel} removed`);
            }
          }
          count('delete folder');
        }
      } catch {
        count('raced (skipped)');
      }
    }

    // Activity stops: faults off, the engine drains, then a final quiescent pass.
    if (fullUntil) outageSeen = await catReplica((r) => r?.state === 'unavailable');
    for (const e of emulators) e.faults.clear();
    const operationsMs = Date.now() - started;
    const running = server as RunningProxyServer;
    await running.shares?.quiesce(share.id);
    const convergeMs = Date.now() - started - operationsMs;
    const after = running.shares?.stats(share.id);
    const engineStats: Record<string, number> = {};
    for (const st of [statsBeforeRestart, after])
      for (const [k, v] of Object.entries(st ?? {}) as [string, number][])
        engineStats[k] = (engineStats[k] ?? 0) + v;

    const trees = await Promise.all(members.map((m) => fileHashes(m.person, m.root)));
    const operations = Object.entries(counts)
      .filter(([k]) => k !== 'proxy restart' && k !== 'raced (skipped)' && k !== 'onedrive full')
      .reduce((n, [, v]) => n + v, 0);
    const injected = emulators.map((e) => Object.values(e.faults.stats().fired).reduce((n, v) => n + v, 0));
    // For bench/share-mirror.bench.ts: one machine-readable line. Bytes are API body bytes
    // each emulator received and sent (the mirror's and the people's clients together).
    process.stderr.write(
      `SHARE_RESULT ${JSON.stringify({
        seed: SEED,
        operations,
        counts,
        operationsMs,
        convergeMs,
        files: trees[0]?.size ?? 0,
        faults: { dropbox: injected[0], gdrive: injected[1], onedrive: injected[2] },
        bytes: Object.fromEntries(
          ['dropbox', 'gdrive', 'onedrive'].map((c, i) => [
            c,
            { up: emulators[i]?.traffic.requestBytes, down: emulators[i]?.traffic.responseBytes },
          ]),
        ),
        engine: engineStats,
      })}\n`,
    );
    // On a divergence, the log entries of the paths concerned help the diagnosis.
    const differing = new Set<string>();
    for (const t of trees.slice(1)) {
      for (const k of new Set([...t.keys(), ...(trees[0]?.keys() ?? [])])) {
        if (t.get(k) !== trees[0]?.get(k)) differing.add(k);
      }
    }
    if (differing.size > 0) {
      // The paths, their folders and their names (a rename or folder move brought them there).
      const keys = new Set<string>();
      for (const d of differing) {
        const parts = d.split('/');
        for (let i = 1; i <= parts.length; i++) keys.add(parts.slice(0, i).join('/'));
        keys.add(`/${parts.at(-1) ?? ''}`);
      }
      const related = (await running.shares?.logEntries(share.id, [...keys])) ?? [];
      process.stderr.write(
        `differing ${JSON.stringify([...differing])}\n${related.map((r) => JSON.stringify(r)).join('\n')}\n`,
      );
      for (const [i, t] of trees.entries()) {
        process.stderr.write(
          `${members[i]?.name}: ${JSON.stringify([...differing].map((d) => t.get(d)?.slice(0, 8)))}\n`,
        );
      }
    }
    const present = await allLines(members[0]?.person as Provider, members[0]?.root ?? '');
    const missing = [...written].filter((t) => !retired.has(t) && !present.has(t));
    if (process.env.WEFT_DEBUG && (differing.size > 0 || missing.length > 0)) {
      // Every request each cloud received (endpoint, path argument, status), beside the
      // person and engine lines: who touched a lost version's file last.
      for (const [i, e] of emulators.entries()) {
        for (const r of e.requestLog)
          process.stderr.write(`${JSON.stringify({ cloud: ['dropbox', 'gdrive', 'onedrive'][i], ...r })}\n`);
      }
    }
    for (const [i, t] of trees.entries()) expect([...t], members[i]?.name).toEqual([...(trees[0] ?? [])]);
    // Every cloud refuses a stale save atomically (Drive through v2 If-Match), so no version
    // may be missing, whichever member wrote it.
    if (missing.length > 0)
      process.stderr.write(`lost: ${missing.map((t) => `${t} (${origins.get(t)})`).join(', ')}\n`);
    expect(missing).toEqual([]);
    // The full OneDrive was shown as such to the owner, and is available again, nothing waiting.
    if (od) {
      expect(outageSeen).toMatchObject({ state: 'unavailable', cause: 'full' });
      expect(await catReplica(() => true)).toEqual({ state: 'available', waiting: 0 });
    }

    const faults = emulators.map((e) => {
      const s = e.faults.stats();
      return `${s.requests} requests, injected ${JSON.stringify(s.fired)}`;
    });
    process.stderr.write(
      `share e2e (seed ${SEED}): ${operationsMs} ms of operations, converged ${convergeMs} ms later, ${JSON.stringify(counts)}; ` +
        `${trees[0]?.size ?? 0} files, ${[...(trees[0]?.keys() ?? [])].filter((k) => k.includes('conflicted copy')).length} conflicted copies; ` +
        `${written.size} versions written, ${retired.size} deleted by their readers, ` +
        `engine ${JSON.stringify(engineStats)}; ` +
        `faults: dropbox ${faults[0]}; drive ${faults[1]}; onedrive ${faults[2]}\n`,
    );
  });
});
