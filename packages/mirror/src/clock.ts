/**
 * The mirror's one clock: milliseconds since the epoch. Every time the engine reads — log
 * entries' creation, conflicted-copy names, outages and their probes, the drain budget,
 * folders set aside for removal, the verification interval — comes from the clock it was
 * given, so a test drives all of it by moving that clock alone. Waiting (timers) stays
 * real: a clock tells the time, it does not pass it.
 */
export type Clock = () => number;

/** The system clock (the default). */
export const systemClock: Clock = () => Date.now();
