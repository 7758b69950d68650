/**
 * The preload: exposes one frozen API object, `window.weft`, through contextBridge (see
 * bridge.ts: only prefixed channels of known methods pass).
 */
import { contextBridge, ipcRenderer } from 'electron';
import { createBridge } from './bridge.ts';

contextBridge.exposeInMainWorld('weft', createBridge(ipcRenderer));
