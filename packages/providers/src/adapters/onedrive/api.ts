/**
 * The OneDrive adapter's wire shapes: options, constants, the zod schemas of Graph's items
 * and pages, how a provider path becomes a Graph address, how an item becomes an Entry, and
 * the narrow view of the provider that the upload and feed code run against.
 */
import type { Client } from '@microsoft/microsoft-graph-client';
import { z } from 'zod';
import { TransientError } from '../../errors.ts';
import { normalizePath } from '../../paths.ts';
import type { Entry } from '../../provider.ts';
import type { AccessTokenSource } from '../../oauth/token-source.ts';
import type { ChunkRetryOptions } from '../chunk-retry.ts';

/** `maxRetryAfterMs` caps the wait an upload session's refused fragment honours (default 60 s). */
export interface OneDriveProviderOptions extends ChunkRetryOptions {
  readonly token: string | AccessTokenSource;
  /** Folder below the drive root that is this provider's root ('' = the whole drive). */
  readonly root?: string;
  /** Graph origin, e.g. the emulator's https://localhost:PORT. Default https://graph.microsoft.com. */
  readonly graphOrigin?: string;
  /** Upload session fragment size, a multiple of 320 KiB. Default 10 MiB (32 × 320 KiB). */
  readonly fragmentSize?: number;
  /** fetch for the pre-authenticated upload URLs (default: the global one). */
  readonly fetch?: typeof fetch;
}

export const KiB = 1024;
export const MiB = 1024 * KiB;
export const SIMPLE_MAX = 4 * MiB;
export const CURSOR_PREFIX = 'od1:';

export const Item = z
  .object({
    id: z.string(),
    name: z.string().optional(),
    eTag: z.string().optional(),
    cTag: z.string().optional(),
    size: z.number().optional(),
    lastModifiedDateTime: z.string().optional(),
    fileSystemInfo: z.object({ lastModifiedDateTime: z.string().optional() }).partial().optional(),
    parentReference: z
      .object({ id: z.string().optional(), path: z.string().optional() })
      .partial()
      .optional(),
    folder: z.object({}).passthrough().optional(),
    file: z
      .object({
        hashes: z
          .object({ quickXorHash: z.string().optional(), sha256Hash: z.string().optional() })
          .partial()
          .optional(),
      })
      .passthrough()
      .optional(),
    deleted: z.object({}).passthrough().optional(),
    root: z.object({}).passthrough().optional(),
  })
  .passthrough();
export type Item = z.infer<typeof Item>;
export const ItemPage = z
  .object({
    value: z.array(z.unknown()),
    '@odata.nextLink': z.string().optional(),
    '@odata.deltaLink': z.string().optional(),
  })
  .passthrough();

/** What the upload and feed code need of the provider: its name, the client and the classifying call. */
export interface GraphCalls {
  readonly name: string;
  readonly client: Client;
  call<T>(where: string, fn: () => Promise<T>, signal?: AbortSignal): Promise<T>;
}

export function encodePath(p: string): string {
  return p
    .split('/')
    .map((s) => encodeURIComponent(s))
    .join('/');
}

export function parseItem(name: string, v: unknown): Item {
  const r = Item.safeParse(v);
  if (!r.success) throw new TransientError(`${name}: unexpected item from Graph: ${r.error.message}`);
  return r.data;
}

export function toEntry(p: string, it: Item): Entry {
  const modified = it.fileSystemInfo?.lastModifiedDateTime ?? it.lastModifiedDateTime;
  if (it.folder || it.root)
    return { path: p, kind: 'dir', size: 0, modifiedMs: modified ? Date.parse(modified) : 0, revision: '' };
  const qx = it.file?.hashes?.quickXorHash;
  return {
    path: p,
    kind: 'file',
    size: it.size ?? 0,
    modifiedMs: modified ? Date.parse(modified) : 0,
    revision: it.eTag ?? '',
    ...(qx ? { hash: { algorithm: 'quickxor', value: qx } } : {}),
  };
}

/** A Graph name as a provider path segment, or undefined when it breaks the path rules. */
export function validName(name: string | undefined): string | undefined {
  if (!name || name.includes('/')) return undefined;
  try {
    return normalizePath(name);
  } catch {
    return undefined;
  }
}
