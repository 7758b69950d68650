export * from './api.ts';
export * from './format.ts';
export * from './tray-state.ts';
export * from './folder-picker.ts';
