/**
 * OneDrive server-side copy is asynchronous: Graph answers 202 with a monitor URL (no auth
 * needed) that reports the job until it is completed with the new item's id.
 */
import { z } from 'zod';
import { throwIfAborted } from '../../body.ts';
import { TransientError } from '../../errors.ts';
import { type GraphCalls, type Item, parseItem } from './api.ts';

const Job = z.object({ status: z.string(), resourceId: z.string().optional() }).passthrough();

/** Poll `monitor` for the copy of `f` to `t` (61 looks at most, waits doubling from 50 ms to 2 s). */
export async function awaitCopy(
  g: GraphCalls,
  fetchImpl: typeof fetch,
  monitor: string,
  f: string,
  t: string,
  signal: AbortSignal | undefined,
): Promise<Item> {
  for (let attempt = 0; ; attempt++) {
    throwIfAborted(signal);
    const r = await fetchImpl(monitor, signal ? { signal } : {});
    const job = Job.parse(await r.json());
    if (job.status === 'completed' && job.resourceId) {
      const id = job.resourceId;
      return parseItem(
        g.name,
        await g.call(
          `get ${t}`,
          () => g.client.api(`/me/drive/items/${encodeURIComponent(id)}`).get() as Promise<unknown>,
          signal,
        ),
      );
    }
    if (job.status === 'failed' || attempt >= 60) {
      throw new TransientError(
        `${g.name}: copy ${f} -> ${t} ${job.status === 'failed' ? 'failed' : 'did not finish'}`,
      );
    }
    await new Promise((done) => setTimeout(done, Math.min(2000, 50 * 2 ** attempt)));
  }
}
