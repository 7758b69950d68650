/**
 * Work ahead of a consumer: `fn` runs on up to `depth` items before the one being consumed,
 * and the results come out in item order. Reading 10,000 small files one after another
 * waited on the thread pool four times per file (issue #16: most of the agent's time between
 * two bundles); with reads in flight while the previous results are used — and while a
 * bundle is on its way — the waits overlap.
 *
 * A call that fails throws when its turn comes, never earlier and never unheard (each call's
 * outcome is observed as it starts: an unhandled rejection would end the process). A
 * consumer that stops early leaves at most `depth` calls to finish on their own.
 *
 * The event loop gets a turn at least every TURN_EVERY results, and after TURN_MS of work:
 * when the calls finish at once (a small file read on the event loop), the consumer and the
 * calls would otherwise run in microtasks alone — a bundle's 500 files at a stretch held the
 * agent's UI for 150–320 ms of CPU (issue #16).
 */
/** Results at most between two turns of the event loop. */
export const TURN_EVERY = 32;
/** Work (ms) after which the next result waits for a turn of the event loop. */
const TURN_MS = 10;

export async function* readAhead<T, R>(
  items: Iterable<T>,
  depth: number,
  fn: (item: T) => Promise<R>,
): AsyncGenerator<R> {
  if (!Number.isInteger(depth) || depth < 1)
    throw new RangeError(`depth must be a positive integer, not ${depth}`);
  type Outcome = { readonly ok: true; readonly value: R } | { readonly ok: false; readonly error: unknown };
  const it = items[Symbol.iterator]();
  /** In item order; never longer than `depth`. */
  const pending: Promise<Outcome>[] = [];
  let done = false;
  const startOne = (): void => {
    const n = it.next();
    if (n.done) {
      done = true;
      return;
    }
    let p: Promise<R>;
    try {
      p = fn(n.value);
    } catch (error) {
      p = Promise.reject(error);
    }
    pending.push(
      p.then(
        (value) => ({ ok: true, value }),
        (error: unknown) => ({ ok: false, error }),
      ),
    );
  };
  while (!done && pending.length < depth) startOne();
  let sinceTurn = 0;
  let turnAt = performance.now();
  for (let next = pending.shift(); next !== undefined; next = pending.shift()) {
    if (++sinceTurn > TURN_EVERY || performance.now() - turnAt >= TURN_MS) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      sinceTurn = 1;
      turnAt = performance.now();
    }
    const outcome = await next;
    if (!done) startOne();
    if (!outcome.ok) throw outcome.error;
    yield outcome.value;
  }
}
