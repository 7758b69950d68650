export * from './api.ts';
export * from './empty-status.ts';
export * from './cost.ts';
export * from './versions.ts';
export * from './folders.ts';
export * from './storage-health.ts';
