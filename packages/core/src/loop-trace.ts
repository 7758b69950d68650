/**
 * What held the agent's event loop (issue #16: the agent answers its UI within 100 ms).
 * `WEFT_LOOP_TRACE_MS=50 weft agent …` writes a line to stderr for each stretch longer than
 * that in which the loop did not turn, with the CPU the process used meanwhile: on a loaded
 * machine a stall of 800 ms wall with 60 ms of CPU was the scheduler, one with 750 ms of CPU
 * was the agent. The stretch's monotonic times (µs, the clock of `--cpu-prof` profiles) let
 * bench/loop-stalls.ts name the code that ran in it from a profile of the same run.
 */

/** A stretch in which the loop did not turn. */
export interface LoopStall {
  /** Monotonic time (µs, process.hrtime) at its start and end. */
  readonly fromUs: number;
  readonly toUs: number;
  /** Its length beyond the tick, ms (wall). */
  readonly heldMs: number;
  /** CPU the whole process used meanwhile, ms (user + system; the thread pool's too). */
  readonly cpuMs: number;
}

/** The tick (ms) the watcher asks for; a later turn is a stall of the difference. */
const TICK_MS = 5;

/**
 * Watch the loop: `onStall` for each stretch held longer than `thresholdMs`. Returns a
 * stop function; the timer does not keep the process alive.
 */
export function watchLoop(thresholdMs: number, onStall: (s: LoopStall) => void): () => void {
  let last = process.hrtime.bigint();
  let cpu = process.cpuUsage();
  const timer = setInterval(() => {
    const now = process.hrtime.bigint();
    const used = process.cpuUsage(cpu);
    cpu = process.cpuUsage();
    const heldMs = Number(now - last) / 1e6 - TICK_MS;
    if (heldMs >= thresholdMs)
      onStall({
        fromUs: Number(last / 1000n),
        toUs: Number(now / 1000n),
        heldMs,
        cpuMs: (used.user + used.system) / 1000,
      });
    last = now;
  }, TICK_MS);
  timer.unref();
  return () => clearInterval(timer);
}

/**
 * From WEFT_LOOP_TRACE_MS (unset: nothing): stalls to stderr as they happen, and the longest
 * (by CPU) when the process exits.
 */
export function traceLoopFromEnv(env: NodeJS.ProcessEnv = process.env): void {
  const ms = Number(env.WEFT_LOOP_TRACE_MS);
  if (!(ms > 0)) return;
  let worst: LoopStall | undefined;
  let count = 0;
  const line = (s: LoopStall): string =>
    `held ${s.heldMs.toFixed(0)} ms, CPU ${s.cpuMs.toFixed(0)} ms, at ${s.fromUs}–${s.toUs} µs`;
  watchLoop(ms, (s) => {
    count += 1;
    if (!worst || s.cpuMs > worst.cpuMs) worst = s;
    process.stderr.write(`weft: loop ${line(s)}\n`);
  });
  process.once('exit', () => {
    process.stderr.write(
      `weft: loop stalls ≥ ${ms} ms: ${count}${worst ? `; most CPU: ${line(worst)}` : ''}\n`,
    );
  });
}
