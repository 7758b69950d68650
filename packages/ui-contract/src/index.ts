export * from './api.ts';
export * from './empty-status.ts';
