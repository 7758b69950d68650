/**
 * The Dropbox adapter's wire shapes: options, constants and the zod schemas of what the API
 * returns (file, folder and deleted metadata; list_folder pages), and the narrow view of the
 * provider that the upload code runs against.
 */
import type { Dropbox } from 'dropbox';
import { z } from 'zod';
import type { AccessTokenSource } from '../../oauth/token-source.ts';

export interface DropboxProviderOptions {
  /** An access token, or a source that refreshes (see oauth/). */
  readonly token: string | AccessTokenSource;
  /** Folder in the account that is this provider's root, e.g. '/Apps/Weft' ('' = whole account). */
  readonly root?: string;
  /** Send every request here instead of https://{api,content,notify}.dropboxapi.com (the emulator). */
  readonly baseUrl?: string;
  /** fetch to use (default: the global one). */
  readonly fetch?: typeof fetch;
  /** Upload session chunk size; a multiple of 4 MiB. Default 8 MiB. */
  readonly chunkSize?: number;
  /** Batch commits of small files: entries per finish_batch_v2 (≤ 1000; 0 disables). Default 100. */
  readonly batchSize?: number;
  /** How long a batch waits for more files before it is sent. Default 15 ms. */
  readonly batchLingerMs?: number;
}

export const MiB = 1024 * 1024;
export const DROPBOX_BLOCK = 4 * MiB;
export const CURSOR_PREFIX = 'dbx1:';
export const API_HOSTS = /^https:\/\/(api|content|notify)\.dropboxapi\.com/;

export const FileMeta = z.object({
  '.tag': z.literal('file'),
  name: z.string(),
  path_lower: z.string().optional(),
  path_display: z.string().optional(),
  id: z.string(),
  client_modified: z.string(),
  server_modified: z.string(),
  rev: z.string(),
  size: z.number(),
  content_hash: z.string().optional(),
});
export const FolderMeta = z.object({
  '.tag': z.literal('folder'),
  name: z.string(),
  path_lower: z.string().optional(),
  path_display: z.string().optional(),
  id: z.string(),
});
export const DeletedMeta = z.object({
  '.tag': z.literal('deleted'),
  name: z.string(),
  path_lower: z.string().optional(),
  path_display: z.string().optional(),
});
export const Metadata = z.discriminatedUnion('.tag', [FileMeta, FolderMeta, DeletedMeta]);
export type Metadata = z.infer<typeof Metadata>;
export const ListResult = z.object({
  entries: z.array(z.unknown()),
  cursor: z.string(),
  has_more: z.boolean(),
});

/** What the upload code needs of the provider: its name, the SDK and the classifying call. */
export interface DropboxCalls {
  readonly name: string;
  readonly sdk: Dropbox;
  call<T>(where: string, fn: () => Promise<{ result: T }>, signal?: AbortSignal): Promise<T>;
}
