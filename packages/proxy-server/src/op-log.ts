/**
 * The op log (config `opLogFile`; off by default): one JSON line per file operation the
 * scheduler finished, appended before the operation's answer leaves, so a `kill -9` loses
 * no line of anything acknowledged. The cluster tests merge the logs of every instance and
 * check that related operations never ran at once and applied in order (e2e/src/op-order.ts).
 *
 *   {"i":"<instance id>","ns":"<namespace>","p":["a/b"],"a":<arrived ms>,"s":<started ms>,
 *    "e":<ended ms>,"q":[<change seq of each result; 0 = changed nothing>]}
 *
 * `q` is empty when the operation failed as a whole (the error is not logged).
 */
import { appendFileSync } from 'node:fs';
import type { SchedulerOptions } from './scheduler.ts';

/** One line of the op log (exported for the checker that reads the logs back). */
export interface OpLogLine {
  /** Instance id. */
  readonly i: string;
  /** Namespace. */
  readonly ns: string;
  /** The paths it took (both ends of a move). */
  readonly p: readonly string[];
  /** Arrived, started, ended (epoch ms). */
  readonly a: number;
  readonly s: number;
  readonly e: number;
  /** Change seqs of its results (per path when as many as paths; 0 = changed nothing). */
  readonly q: readonly number[];
}

function seqOf(r: unknown): number | undefined {
  if (typeof r !== 'object' || r === null) return undefined;
  const o = r as { seq?: unknown; result?: unknown };
  if (typeof o.seq === 'number') return o.seq;
  return o.result === undefined ? undefined : seqOf(o.result);
}

/** The scheduler observer that appends to `file`. */
export function opLogger(file: string, instanceId: string): NonNullable<SchedulerOptions['onDone']> {
  return (d) => {
    const results = Array.isArray(d.result) ? d.result : [d.result];
    const q = results.map(seqOf).filter((x): x is number => x !== undefined);
    const line: OpLogLine = {
      i: instanceId,
      ns: d.namespace,
      p: d.paths,
      a: d.arrivedMs,
      s: d.startedMs,
      e: d.endedMs,
      q,
    };
    appendFileSync(file, JSON.stringify(line) + '\n');
  };
}
