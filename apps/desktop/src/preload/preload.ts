/**
 * The preload: exposes one frozen API object, `window.weft`, through contextBridge. Only
 * prefixed channels of known methods pass; the renderer never sees ipcRenderer itself.
 */
import { contextBridge, ipcRenderer, type IpcRendererEvent } from 'electron';
import { type ApiMethod, STATUS_EVENT, channelOf, isApiMethod } from '../common/api.ts';

const bridge = Object.freeze({
  call(method: ApiMethod, input: unknown): Promise<unknown> {
    if (typeof method !== 'string' || !isApiMethod(method))
      return Promise.reject(new Error(`unknown method ${String(method)}`));
    return ipcRenderer.invoke(channelOf(method), input) as Promise<unknown>;
  },
  onStatus(listener: (raw: unknown) => void): () => void {
    const wrapped = (_e: IpcRendererEvent, raw: unknown): void => listener(raw);
    ipcRenderer.on(STATUS_EVENT, wrapped);
    return () => {
      ipcRenderer.removeListener(STATUS_EVENT, wrapped);
    };
  },
});

contextBridge.exposeInMainWorld('weft', bridge);
