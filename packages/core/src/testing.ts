/**
 * Test doubles other packages' tests may use (`@weft/core/testing`): the in-memory proxy
 * that stands in for a real server behind the engine's RemoteStore.
 */
export { MemoryRemoteStore, MemoryServer, type MemoryServerOptions } from './remote/memory-store.ts';
