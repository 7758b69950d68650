/**
 * Main-process side of the IPC contract: one handler per prefixed channel, each validating
 * the sender and the input (dispatch validates input and output with the shared schemas).
 * Electron is passed in, so this module is testable without the binary.
 */
import { type ApiHandlers, type ApiMethod, api, channelOf, dispatch } from '../common/api.ts';
import { PICK_FOLDER_CHANNEL } from '../common/folder-picker.ts';
import { TRAY_ACTION_CHANNEL, type TrayShellAction, isTrayShellAction } from '../common/tray-state.ts';

export interface IpcMainLike {
  handle(
    channel: string,
    listener: (event: { senderFrame: { url: string } | null }, input: unknown) => Promise<unknown>,
  ): void;
  removeHandler(channel: string): void;
}

/**
 * The sender check for registerIpc: only the packaged renderer's own page
 * (`file://…/renderer/index.html`, any `#screen`) — not another file, and not the same
 * renderer served over HTTP by the agent (that one signs in with a login link instead).
 * The window's page needs no secret: this check, on the in-process agent's handlers, is
 * its whole authority, so no secret ever crosses the bridge.
 */
export function isRendererPage(rendererIndexUrl: string): (url: string) => boolean {
  const expected = new URL(rendererIndexUrl);
  if (expected.protocol !== 'file:') throw new Error('the renderer page is a file: URL');
  return (url) => {
    let u: URL;
    try {
      u = new URL(url);
    } catch {
      return false;
    }
    return (
      u.protocol === 'file:' &&
      u.host === expected.host &&
      u.pathname === expected.pathname &&
      u.search === ''
    );
  };
}

/** Register every API channel; returns a function that removes them again. */
export function registerIpc(
  ipc: IpcMainLike,
  handlers: ApiHandlers,
  isTrustedUrl: (url: string) => boolean,
): () => void {
  const methods = Object.keys(api) as ApiMethod[];
  for (const m of methods) {
    ipc.handle(channelOf(m), async (event, input) => {
      const url = event.senderFrame?.url ?? '';
      if (!isTrustedUrl(url))
        return { ok: false, error: { code: 'bad-request', message: 'untrusted sender' } };
      return dispatch(handlers, m, input);
    });
  }
  return () => {
    for (const m of methods) ipc.removeHandler(channelOf(m));
  };
}

/**
 * The tray popover's shell actions (open the folder, open the window): one channel, the
 * same sender check, and only the two known values; returns a remover.
 */
export function registerTrayActions(
  ipc: IpcMainLike,
  isTrustedUrl: (url: string) => boolean,
  run: (action: TrayShellAction) => void,
): () => void {
  ipc.handle(TRAY_ACTION_CHANNEL, async (event, action) => {
    const url = event.senderFrame?.url ?? '';
    if (!isTrustedUrl(url)) return { ok: false, error: { code: 'bad-request', message: 'untrusted sender' } };
    if (!isTrayShellAction(action))
      return { ok: false, error: { code: 'bad-request', message: 'unknown tray action' } };
    run(action);
    return { ok: true, value: null };
  });
  return () => ipc.removeHandler(TRAY_ACTION_CHANNEL);
}

/**
 * Settings' "Choose…" (Add folder): the system's folder dialog, for the trusted pages only;
 * answers the chosen path or null. Returns a remover.
 */
export function registerFolderPicker(
  ipc: IpcMainLike,
  isTrustedUrl: (url: string) => boolean,
  pick: () => Promise<string | null>,
): () => void {
  ipc.handle(PICK_FOLDER_CHANNEL, async (event) => {
    const url = event.senderFrame?.url ?? '';
    if (!isTrustedUrl(url)) return null;
    return pick();
  });
  return () => ipc.removeHandler(PICK_FOLDER_CHANNEL);
}
