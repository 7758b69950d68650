/**
 * The live change feed's WebSocket (`GET /v1/feed?cursor=`, docs/formats/api.md), opened by
 * the proxy client on the instance it talks to now. With several instances (server-pool.ts)
 * a socket that cannot connect reports its instance away, and one whose instance the pool
 * finds down is ended, so that the engine connects again to the instance the pool moved to
 * — from the same cursor, which is the journal's.
 */
import { type FeedServerMessage, FeedServerMessageCheck } from '@weft/wire';
import WebSocket from 'ws';
import { type Disposable, toDisposable } from '../lifecycle.ts';
import type { ServerPool } from './server-pool.ts';

export function openFeedSocket(
  target: {
    /** The feed's http(s) URL with its cursor. */
    readonly url: string;
    /** The instance it is on. */
    readonly base: string;
    readonly token: string;
    readonly servers: ServerPool | undefined;
  },
  onMessage: (m: FeedServerMessage) => void,
  onClose: (reason: string) => void,
): Disposable {
  const { base, servers } = target;
  const ws = new WebSocket(target.url.replace(/^http/, 'ws'), {
    headers: { authorization: `Bearer ${target.token}` },
  });
  let closed = false;
  let opened = false;
  ws.on('open', () => {
    opened = true;
    servers?.answered(base);
  });
  const close = (reason: string): void => {
    if (closed) return;
    closed = true;
    onClose(reason);
  };
  ws.on('message', (data, isBinary) => {
    if (isBinary) return;
    try {
      onMessage(FeedServerMessageCheck.parse(JSON.parse(data.toString())));
    } catch (e) {
      close(`malformed feed message: ${(e as Error).message}`);
      ws.terminate();
    }
  });
  ws.on('error', (e) => {
    // Not even connected: that instance is away (the next connect goes to another).
    if (!opened) servers?.failed(base, 'unreachable');
    close(e.message);
  });
  // Its instance found down (a hung one sends nothing and closes nothing): end the socket,
  // and the engine connects again, to the instance the pool moved to.
  const down = servers?.onDown((url) => {
    if (url !== base) return;
    close(`${url} stopped answering`);
    ws.terminate();
  });
  ws.once('close', () => down?.dispose());
  ws.on('close', (code) => close(`closed (${code})`));
  const ping = setInterval(() => {
    if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: 'ping' }));
  }, 25_000);
  return toDisposable(() => {
    clearInterval(ping);
    down?.dispose();
    closed = true;
    ws.terminate();
  });
}
