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
 */
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
  for (let next = pending.shift(); next !== undefined; next = pending.shift()) {
    const outcome = await next;
    if (!done) startOne();
    if (!outcome.ok) throw outcome.error;
    yield outcome.value;
  }
}
