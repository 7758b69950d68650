/**
 * The object the preload exposes as `window.weft`: frozen, and only prefixed channels of
 * known methods pass (the renderer never sees ipcRenderer), plus the two things only the
 * shell can do for the tray popover (open the folder, open the window) and for Settings (the
 * system's folder dialog for "Add folder"). Electron's
 * ipcRenderer is passed in, so this is unit-tested without the binary.
 */
import { type ApiMethod, STATUS_EVENT, channelOf, isApiMethod } from '../common/api.ts';
import { PICK_FOLDER_CHANNEL, pickedPath } from '../common/folder-picker.ts';
import { TRAY_ACTION_CHANNEL, type TrayShellAction, isTrayShellAction } from '../common/tray-state.ts';

export interface IpcRendererLike {
  invoke(channel: string, ...args: unknown[]): Promise<unknown>;
  on(channel: string, listener: (event: unknown, ...args: unknown[]) => void): unknown;
  removeListener(channel: string, listener: (event: unknown, ...args: unknown[]) => void): unknown;
}

export interface WeftBridge {
  call(method: ApiMethod, input: unknown): Promise<unknown>;
  onStatus(listener: (raw: unknown) => void): () => void;
  trayAction(action: TrayShellAction): Promise<unknown>;
  /** The system's folder dialog: the chosen path, or null when cancelled. */
  pickFolder(): Promise<string | null>;
}

export function createBridge(ipc: IpcRendererLike): Readonly<WeftBridge> {
  return Object.freeze({
    call(method: ApiMethod, input: unknown): Promise<unknown> {
      if (typeof method !== 'string' || !isApiMethod(method))
        return Promise.reject(new Error(`unknown method ${String(method)}`));
      return ipc.invoke(channelOf(method), input);
    },
    onStatus(listener: (raw: unknown) => void): () => void {
      const wrapped = (_e: unknown, raw: unknown): void => listener(raw);
      ipc.on(STATUS_EVENT, wrapped);
      return () => {
        ipc.removeListener(STATUS_EVENT, wrapped);
      };
    },
    trayAction(action: TrayShellAction): Promise<unknown> {
      if (!isTrayShellAction(action))
        return Promise.reject(new Error(`unknown tray action ${String(action)}`));
      return ipc.invoke(TRAY_ACTION_CHANNEL, action);
    },
    async pickFolder(): Promise<string | null> {
      return pickedPath(await ipc.invoke(PICK_FOLDER_CHANNEL));
    },
  });
}
