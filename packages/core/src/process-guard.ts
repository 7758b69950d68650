/**
 * The `weft agent` process's last line of defence. A rejection nobody awaited, or an
 * exception nobody caught, ends a Node process by default: one missed error path (a block
 * upload failing while the proxy restarted) took the whole agent down, and with it every
 * folder it syncs. The guard logs each one with its stack and keeps the agent up, since its
 * state lives in the journal and every pass re-reads it. But an agent that keeps throwing
 * is broken, not unlucky: past `maxFaults` within `windowMs` it says so and exits
 * (`EXIT_BROKEN`), so a supervisor restarts it instead of it looping silently.
 */
import type { Disposable } from './lifecycle.ts';

/** Exit code of an agent that gave up after too many uncaught errors (EX_SOFTWARE). */
export const EXIT_BROKEN = 70;

export interface ProcessGuardOptions {
  /** Where each fault is reported (one line, then the stack). */
  readonly log: (message: string) => void;
  /** Faults tolerated within `windowMs` (default 10). */
  readonly maxFaults?: number;
  readonly windowMs?: number;
  /** Default `process.exit`. */
  readonly exit?: (code: number) => void;
  /** Default `process`. */
  readonly target?: NodeJS.EventEmitter;
  readonly now?: () => number;
}

export interface ProcessGuard extends Disposable {
  /** Faults seen since the guard was installed. */
  readonly faults: number;
}

export function installProcessGuard(options: ProcessGuardOptions): ProcessGuard {
  const target = options.target ?? process;
  const maxFaults = options.maxFaults ?? 10;
  const windowMs = options.windowMs ?? 60_000;
  const now = options.now ?? Date.now;
  const exit = options.exit ?? ((code: number) => process.exit(code));
  const recent: number[] = [];
  let faults = 0;
  let exiting = false;
  const describe = (e: unknown): string =>
    e instanceof Error ? (e.stack ?? `${e.name}: ${e.message}`) : `non-error value: ${String(e)}`;
  const fault = (kind: string, e: unknown): void => {
    faults += 1;
    const t = now();
    recent.push(t);
    while (recent.length > 0 && (recent[0] ?? t) <= t - windowMs) recent.shift();
    options.log(`weft agent: ${kind} (kept running): ${describe(e)}`);
    if (recent.length > maxFaults && !exiting) {
      exiting = true;
      options.log(
        `weft agent: ${recent.length} uncaught errors within ${Math.round(windowMs / 1000)} s — ` +
          `the agent is in a broken state; exiting with code ${EXIT_BROKEN}`,
      );
      exit(EXIT_BROKEN);
    }
  };
  const onRejection = (reason: unknown): void => fault('unhandled promise rejection', reason);
  const onException = (error: unknown): void => fault('uncaught exception', error);
  target.on('unhandledRejection', onRejection);
  target.on('uncaughtException', onException);
  return {
    get faults() {
      return faults;
    },
    dispose() {
      target.off('unhandledRejection', onRejection);
      target.off('uncaughtException', onException);
    },
  };
}
