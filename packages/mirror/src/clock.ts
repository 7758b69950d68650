/**
 * The mirror's one clock: milliseconds since the epoch. Every time the engine reads — log
 * entries' creation, conflicted-copy names, outages and their probes, the drain budget,
 * folders set aside for removal, the verification interval — comes from the clock it was
 * given, so a test drives all of it by moving that clock alone. The engine's waiting stays
 * real: a clock tells the time, it does not pass it. Where a wait is itself what a test
 * checks (the inter-proxy sender's reconnect backoff), the waiting is injected too: a
 * `Timer`, by default the system's setTimeout.
 */
export type Clock = () => number;

/** The system clock (the default). */
export const systemClock: Clock = () => Date.now();

/** Run `fn` once after `ms` milliseconds; returns what cancels it. */
export type Timer = (fn: () => void, ms: number) => () => void;

/** The system's timers (the default). */
export const systemTimer: Timer = (fn, ms) => {
  const t = setTimeout(fn, ms);
  return () => clearTimeout(t);
};
