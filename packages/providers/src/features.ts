/**
 * Optional capabilities, declared by each provider — never probed with `typeof`.
 * Callers use the type guards, which also narrow the provider's type.
 */
import type { Provider } from './provider.ts';

export interface Features {
  /** Server-side move/rename; 'files' when folders cannot be moved in one call. */
  readonly move: false | 'files' | 'files-and-folders';
  /** Server-side copy; same meaning as `move`. */
  readonly copy: false | 'files' | 'files-and-folders';
  /** A cursor-based change feed (latestCursor + changes). */
  readonly changeFeed: boolean;
  /** Writes honour ifNotExists / ifRevision atomically on the server. */
  readonly conditionalWrite: boolean;
  /** read() honours offset/length without transferring the rest. */
  readonly rangeRead: boolean;
  /** 'A.txt' and 'a.txt' are different files. */
  readonly caseSensitive: boolean;
  /** write() records options.modifiedMs. */
  readonly setModTime: boolean;
  /** Largest body one request may carry; larger writes are split into a chunked upload. */
  readonly maxSingleUploadBytes: number;
  /** The algorithm of Entry.hash. */
  readonly hashAlgorithm: string;
  /** Entries from list() carry `hash`; otherwise only stat() does. */
  readonly hashInListing: boolean;
  /** How folders exist: real objects, marker objects, or implied by their content only. */
  readonly folders: 'real' | 'marker' | 'implied';
  /** Why a capability is absent, for the docs and the conformance suite's declared gaps. */
  readonly notes?: Readonly<Record<string, string>>;
}

export type WithMove = Provider & { move: NonNullable<Provider['move']> };
export type WithCopy = Provider & { copy: NonNullable<Provider['copy']> };
export type WithChangeFeed = Provider & {
  latestCursor: NonNullable<Provider['latestCursor']>;
  changes: NonNullable<Provider['changes']>;
};

export function hasServerSideMove(p: Provider): p is WithMove {
  return p.features.move !== false && p.move !== undefined;
}

export function hasServerSideCopy(p: Provider): p is WithCopy {
  return p.features.copy !== false && p.copy !== undefined;
}

export function hasChangeFeed(p: Provider): p is WithChangeFeed {
  return p.features.changeFeed && p.latestCursor !== undefined && p.changes !== undefined;
}
