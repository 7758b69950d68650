/**
 * Adapters from the typed client to a transport: Electron IPC through the preload's frozen
 * `window.weft`, or HTTP + server-sent events when `weft agent` serves this page. Over HTTP
 * the page holds no secret: the browser carries the agent's HttpOnly session cookie (from
 * the one-time login link it was opened with) on these same-origin requests.
 */
import { type ApiMethod, type WeftClient, STATUS_EVENT, createClient } from '../common/api.ts';

/** What the preload exposes (see ../preload/preload.ts). */
export interface PreloadBridge {
  call(method: ApiMethod, input: unknown): Promise<unknown>;
  onStatus(listener: (raw: unknown) => void): () => void;
}

declare global {
  interface Window {
    readonly weft?: PreloadBridge;
  }
}

export function ipcClient(bridge: PreloadBridge): WeftClient {
  return createClient(
    (method, input) => bridge.call(method, input),
    (listener) => bridge.onStatus(listener),
  );
}

export function httpClient(base: string): WeftClient {
  return createClient(
    async (method, input) => {
      const res = await fetch(new URL(`api/rpc/${method}`, base), {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        credentials: 'same-origin',
        body: JSON.stringify(input),
      });
      return (await res.json()) as unknown;
    },
    (listener) => {
      const source = new EventSource(new URL('api/events', base));
      const onMessage = (e: MessageEvent<string>): void => {
        try {
          listener(JSON.parse(e.data) as unknown);
        } catch {
          /* a malformed push is dropped; the next one replaces it */
        }
      };
      source.addEventListener('status', onMessage);
      return () => source.close();
    },
  );
}

export function connect(): WeftClient {
  if (window.weft) return ipcClient(window.weft);
  return httpClient(location.href);
}

export { STATUS_EVENT };
