/**
 * Control requests a peer sends outside its batches — its bandwidth figures, or a write to
 * one of this proxy's clouds of content it sent before — answered by the proxy's routing
 * (PeerReceiver.handleRequest) with the cached objects it names pinned meanwhile.
 */
import type { Logger } from 'pino';
import type { PeerCache } from './cache.ts';
import type { DestinationMessage, SourceMessage } from './frames.ts';

/** A control request from a peer (not part of a batch): its bandwidth figures, or a routed write. */
export type PeerRequest = Extract<SourceMessage, { type: 'bandwidth' | 'write' }>;

export interface PeerRequestContext {
  /** The peer that asked. */
  readonly peer: string;
  /** The pair's secret (to open sealed credentials). */
  readonly secret: string;
  /** The cached object file of `sha256` (pinned until the handler returns), if held. */
  readonly object: (sha256: string) => string | undefined;
}

export type PeerRequestHandler = (
  msg: PeerRequest,
  ctx: PeerRequestContext,
) => Promise<DestinationMessage | undefined>;

/**
 * The answer to one request: the handler's, or for a write that failed (or that no handler
 * takes) `write-failed` with the error's code; a failed bandwidth request is only logged.
 */
export async function answerRequest(
  handler: PeerRequestHandler | undefined,
  cache: PeerCache,
  log: Logger,
  peer: string,
  secret: string,
  msg: PeerRequest,
): Promise<DestinationMessage | undefined> {
  const pinned: string[] = [];
  let answer: DestinationMessage | undefined;
  try {
    if (!handler) throw new Error('this proxy does not take routed requests');
    answer = await handler(msg, {
      peer,
      secret,
      object: (sha256) => {
        if (!cache.hasContent(sha256)) return undefined;
        cache.pin(sha256);
        pinned.push(sha256);
        return cache.objectPath(sha256);
      },
    });
  } catch (e) {
    if (msg.type === 'write') {
      const code = (e as { code?: unknown }).code;
      answer = {
        type: 'write-failed',
        id: msg.id,
        code: typeof code === 'string' ? code.slice(0, 64) : 'INTERNAL',
        message: (e as Error).message.slice(0, 2000),
      };
    } else log.warn({ err: e }, 'peer request failed');
  } finally {
    for (const h of pinned) {
      cache.unpin(h);
      void cache.dropIfUnused(h);
    }
  }
  return answer;
}
