/**
 * Random multi-device schedules for the engine harness: each device makes local edits
 * (create, edit, delete, move and rename of files and folders, names that differ only by
 * case, folder deletes), devices sync in a random order, go offline for a while and come
 * back; then everything settles and the convergence check runs:
 *   - every device's folder equals the server's namespace (same paths, same contents);
 *   - nothing is lost: every content a device held unsynced when the schedule ended (an
 *     edit, a new file) is somewhere in the final tree — at its path or as a conflicted copy.
 * A schedule is a pure function of its seed (engines sync only when told), so a failing
 * seed replays; `WEFT_DEBUG=1` prints its log.
 */
import { FakeCloud, type FakeDevice, prng, unsyncedContents } from './fake-cloud.ts';

const NAMES = ['a', 'b', 'c', 'A'];
const DIRS = ['d', 'e', 'D'];

export interface ScheduleOptions {
  readonly devices?: number;
  readonly rounds?: number;
  readonly opsPerRound?: number;
  /** Server and engine small-file threshold (small keeps large-file paths in play). Default 64 bytes. */
  readonly smallFileBytes?: number;
}

export interface ScheduleResult {
  readonly seed: number;
  readonly problems: string[];
  readonly log: string[];
}

async function randomOp(d: FakeDevice, rnd: () => number, tag: string, log: string[]): Promise<void> {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)] as T;
  const tree = await d.kinds();
  // Sorted: the order a directory lists in differs between filesystems; the schedule must not.
  const files = [...tree]
    .filter(([, v]) => v !== 'dir')
    .map(([k]) => k)
    .sort();
  const dirs = [...tree]
    .filter(([, v]) => v === 'dir')
    .map(([k]) => k)
    .sort();
  // Contents of either size class: short text, or above the small-file threshold.
  const body = (): string => (rnd() < 0.2 ? `${tag} ${rnd()} `.repeat(12) : `${tag} ${rnd()}`);
  const r = rnd();
  try {
    if (r < 0.3 || files.length === 0) {
      const dir = rnd() < 0.5 || dirs.length === 0 ? '' : pick(dirs);
      const p = (dir ? dir + '/' : '') + pick(NAMES) + '.txt';
      if (tree.get(p) === 'dir') return;
      log.push(`${tag} write ${p}`);
      await d.write(p, body());
    } else if (r < 0.5) {
      const p = pick(files);
      log.push(`${tag} edit ${p}`);
      await d.write(p, body());
    } else if (r < 0.6) {
      const p = pick(DIRS);
      if (!tree.has(p)) {
        log.push(`${tag} mkdir ${p}`);
        await d.mkdir(p);
      }
    } else if (r < 0.75) {
      const from = pick([...files, ...dirs]);
      const to =
        tree.get(from) === 'dir'
          ? pick(DIRS)
          : `${pick(DIRS.concat(['']))}/${pick(NAMES)}.moved`.replace(/^\//, '');
      const parent = to.includes('/') ? to.slice(0, to.lastIndexOf('/')) : '';
      if (!tree.has(to) && !to.startsWith(from + '/') && (parent === '' || tree.get(parent) === 'dir')) {
        log.push(`${tag} move ${from} ${to}`);
        await d.mv(from, to);
      }
    } else if (r < 0.9) {
      const p = pick(files);
      log.push(`${tag} rm ${p}`);
      await d.rm(p);
    } else {
      const p = pick(dirs.length > 0 ? dirs : files);
      log.push(`${tag} rm -r ${p}`);
      await d.rm(p);
    }
  } catch (e) {
    // A path that vanished meanwhile, or a file in the way of a folder: the next op picks another.
    log.push(`${tag} (skipped: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
}

/** Run one random schedule and return what the convergence check found (empty: converged). */
export async function runSchedule(seed: number, options: ScheduleOptions = {}): Promise<ScheduleResult> {
  const small = options.smallFileBytes ?? 64;
  const cloud = new FakeCloud({ smallFileBytes: small });
  const log: string[] = [];
  const problems: string[] = [];
  const rnd = prng(seed);
  try {
    const names = ['laptop', 'desktop', 'phone'].slice(0, options.devices ?? 2 + Math.floor(rnd() * 2));
    const devices: FakeDevice[] = [];
    for (const n of names)
      devices.push(
        await cloud.addDevice(n, {
          smallFileBytes: small,
          massDeleteCount: 1e9,
          massDeleteFraction: 1,
          ...(process.env.WEFT_DEBUG
            ? {
                trace: (event: string, detail: unknown) =>
                  log.push(`  ${n} ${event} ${JSON.stringify(detail)}`),
              }
            : {}),
        }),
      );
    const rounds = options.rounds ?? 4;
    const ops = options.opsPerRound ?? 4;
    for (let round = 0; round < rounds; round++) {
      for (const d of devices) {
        // Now and then a device drops off the network for a round or two.
        if (rnd() < 0.15) {
          d.offline = !d.offline;
          log.push(`${d.name} ${d.offline ? 'OFFLINE' : 'ONLINE'}`);
        }
        for (let i = 0; i < ops; i++) await randomOp(d, rnd, `${d.name}${round}.${i}`, log);
        if (rnd() < 0.6) {
          log.push(`${d.name} SYNC`);
          await d.sync();
        }
      }
    }
    for (const d of devices) {
      if (d.offline) log.push(`${d.name} ONLINE`);
      d.offline = false;
    }
    const mustSurvive = new Set<string>();
    for (const d of devices) {
      for (const [p, h] of await unsyncedContents(d)) {
        mustSurvive.add(h);
        log.push(`${d.name} holds unsynced ${p} ${h.slice(0, 8)}`);
      }
    }
    log.push('SETTLE');
    await cloud.settle();
    const server = cloud.serverTree();
    for (const d of devices) {
      const have = await d.tree();
      const diff = treeDiff(have, server);
      if (diff.length > 0) problems.push(`${d.name} differs from the server: ${diff.join('; ')}`);
      if (d.engine.error) problems.push(`${d.name} stopped with ${String(d.engine.error)}`);
      const pending = d.engine.journal.pendingOps();
      if (pending.length > 0) problems.push(`${d.name} still has ${pending.length} queued operation(s)`);
    }
    const present = new Set(server.values());
    for (const h of mustSurvive) if (!present.has(h)) problems.push(`content ${h.slice(0, 8)} was lost`);
  } finally {
    await cloud.close();
  }
  if (problems.length > 0 && process.env.WEFT_DEBUG)
    process.stderr.write(`seed ${seed}\n${log.join('\n')}\n`);
  return { seed, problems, log };
}

/** What differs between a device's tree and the server's, in words. */
export function treeDiff(device: Map<string, string>, server: Map<string, string>): string[] {
  const out: string[] = [];
  const short = (h: string | undefined): string => (h === 'dir' ? 'dir' : (h ?? '').slice(0, 8));
  for (const [p, h] of device) {
    const there = server.get(p);
    if (there === undefined) out.push(`only here: ${p} ${short(h)}`);
    else if (there !== h) out.push(`${p}: here ${short(h)}, server ${short(there)}`);
  }
  for (const [p, h] of server) if (!device.has(p)) out.push(`only on the server: ${p} ${short(h)}`);
  return out;
}

/** Run every seed, a few at a time (each waits on its disk and journal much of the time). */
export async function runSeeds(
  list: readonly number[],
  lanes = Number(process.env.WEFT_LANES ?? 4),
): Promise<{ seed: number; problems: string[] }[]> {
  const failed: { seed: number; problems: string[] }[] = [];
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < list.length) {
      const seed = list[next++] as number;
      const r = await runSchedule(seed);
      if (r.problems.length > 0) failed.push({ seed, problems: r.problems });
    }
  };
  await Promise.all(Array.from({ length: lanes }, lane));
  return failed.sort((x, y) => x.seed - y.seed);
}
