/**
 * The operation storm of storm.test.ts, shared with the cluster test: random creates,
 * edits, folder makes, moves and deletes on a device's folder, and the contents a device
 * holds that its last sync has not seen (they must survive the storm).
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import type { Engine } from '@weft/core';
import { localTree } from './harness.ts';

/** What a storm needs of a device: its folder and its engine (for the journal). */
export interface StormDevice {
  readonly folder: string;
  readonly engine: Engine;
}

const NAMES = ['a', 'b', 'c', 'd'];

export async function randomOp(d: StormDevice, rnd: () => number, tag: string, log: string[]): Promise<void> {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)] as T;
  const tree = await localTree(d.folder);
  const files = [...tree].filter(([, v]) => v !== 'dir').map(([k]) => k);
  const dirs = [...tree].filter(([, v]) => v === 'dir').map(([k]) => k);
  const abs = (p: string): string => nodePath.join(d.folder, ...p.split('/'));
  const r = rnd();
  try {
    if (r < 0.35 || files.length === 0) {
      const dir = rnd() < 0.5 || dirs.length === 0 ? '' : pick(dirs);
      const p = (dir ? dir + '/' : '') + pick(NAMES) + '.txt';
      if (tree.get(p) === 'dir') return;
      log.push(`${tag} create ${p}`);
      await fsp.writeFile(abs(p), `${tag} ${rnd()}`);
    } else if (r < 0.55) {
      const p = pick(files);
      log.push(`${tag} edit ${p}`);
      await fsp.writeFile(abs(p), `${tag} edit ${rnd()}`);
    } else if (r < 0.65) {
      const p = pick(NAMES);
      if (!tree.has(p)) {
        log.push(`${tag} mkdir ${p}`);
        await fsp.mkdir(abs(p));
      }
    } else if (r < 0.8) {
      const from = pick([...files, ...dirs]);
      const to = pick(NAMES) + (tree.get(from) === 'dir' ? '' : '.moved');
      if (!tree.has(to) && !to.startsWith(from + '/')) {
        log.push(`${tag} move ${from} ${to}`);
        await fsp.rename(abs(from), abs(to));
      }
    } else {
      const p = pick([...files, ...dirs]);
      log.push(`${tag} rm ${p}`);
      await fsp.rm(abs(p), { recursive: true, force: true });
    }
  } catch {
    // A path that vanished meanwhile: the next op picks another.
  }
}

/** Contents a device holds that differ from its synced base: they must survive. */
export async function unsyncedContents(d: StormDevice): Promise<Set<string>> {
  const out = new Set<string>();
  for (const [p, h] of await localTree(d.folder)) {
    if (h === 'dir') continue;
    if (d.engine.journal.getFile(p)?.syncedHash !== h) out.add(h);
  }
  return out;
}
