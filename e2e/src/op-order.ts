/**
 * The ordering checker of the proxy's scheduler tests (packages/proxy-server/test/
 * scheduler.test.ts, relatedOperationsNeverReorderAndWaitForEachOther), run over the op
 * logs of several proxy instances merged (src/op-log.ts in the proxy): operations on the
 * same or related paths of a namespace (one inside the other; both ends of a move) must
 *  - never run at once, whichever instances ran them (stop-and-wait across instances);
 *  - apply in the order they ran: the one that finished first has the smaller change seq;
 *  - on one instance, run in arrival order.
 * The instances share one machine, hence one clock: their times compare.
 */
import * as fsp from 'node:fs/promises';
import type { OpLogLine } from '@weft/proxy-server';

/** One line of an instance's op log (its fields are documented there). */
export type LoggedOp = OpLogLine;

/** Every line of these files (a line cut short by a kill -9 mid-write is left out). */
export async function readOpLogs(files: readonly string[]): Promise<LoggedOp[]> {
  const out: LoggedOp[] = [];
  for (const f of files) {
    const text = await fsp.readFile(f, 'utf8').catch(() => '');
    for (const line of text.split('\n')) {
      if (!line) continue;
      try {
        out.push(JSON.parse(line) as LoggedOp);
      } catch {
        // a torn last line
      }
    }
  }
  return out;
}

const related = (x: string, y: string): boolean =>
  x === y || x.startsWith(y + '/') || y.startsWith(x + '/') || x === '' || y === '';

/** The seq an op's result gave at path index k (undefined: none, the op failed whole). */
function seqAt(op: LoggedOp, k: number): number | undefined {
  return op.q.length === op.p.length ? op.q[k] : op.q[0];
}

/** Ordering violations (empty: none), each a sentence naming both operations. */
export function orderingViolations(ops: readonly LoggedOp[]): string[] {
  const out: string[] = [];
  const show = (o: LoggedOp): string =>
    `${o.i} [${o.p.join(', ')}] ${o.s}–${o.e} seq ${o.q.join(',') || '-'}`;
  const byNs = new Map<string, LoggedOp[]>();
  for (const o of ops) byNs.set(o.ns, [...(byNs.get(o.ns) ?? []), o]);
  for (const list of byNs.values()) {
    const sorted = [...list].sort((x, y) => x.s - y.s || x.e - y.e);
    for (let m = 0; m < sorted.length; m++) {
      const x = sorted[m]!;
      for (let n = m + 1; n < sorted.length; n++) {
        const y = sorted[n]!;
        // Related at which path indices?
        let pair: [number, number] | undefined;
        for (let k = 0; k < x.p.length && !pair; k++)
          for (let l = 0; l < y.p.length && !pair; l++) if (related(x.p[k]!, y.p[l]!)) pair = [k, l];
        if (!pair) continue;
        if (y.s < x.e) {
          out.push(`ran at once: ${show(x)} and ${show(y)}`);
          continue;
        }
        const sx = seqAt(x, pair[0]);
        const sy = seqAt(y, pair[1]);
        if (sx && sy && sx >= sy)
          out.push(`applied out of order: ${show(x)} ran first but has seq ≥ ${show(y)}`);
        if (x.i === y.i && y.a < x.a)
          out.push(`not in arrival order on ${x.i}: ${show(y)} arrived first, ran after ${show(x)}`);
      }
    }
  }
  return out;
}
