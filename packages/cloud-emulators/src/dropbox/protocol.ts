/**
 * The Dropbox emulator's protocol pieces, free of server state: options, the argument
 * schemas, upload session and list cursor records, name rules, and Dropbox's error shapes
 * (409 route errors carrying the Stone union, 400 text for bad arguments).
 */
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { type EmulatorOptions, HttpError } from '../http.ts';

export interface DropboxEmulatorOptions extends EmulatorOptions {
  /** Multiply longpoll timeouts by this (tests use a small factor). Default 1. */
  readonly longpollTimeScale?: number;
  /** `backoff` (seconds) in longpoll answers, asking clients to wait before the next call. Default none. */
  readonly longpollBackoffSeconds?: number;
  /** list_folder page size when the caller gives no limit. Default 500. */
  readonly defaultListLimit?: number;
}

export const Path = z.string();
export const WriteModeSchema = z.union([
  z.literal('add'),
  z.literal('overwrite'),
  z.object({ '.tag': z.literal('add') }),
  z.object({ '.tag': z.literal('overwrite') }),
  z.object({ '.tag': z.literal('update'), update: z.string().min(9) }),
]);
export const CommitInfo = z.object({
  path: Path,
  mode: WriteModeSchema.default('add'),
  autorename: z.boolean().default(false),
  client_modified: z.string().optional(),
  mute: z.boolean().optional(),
  strict_conflict: z.boolean().default(false),
  content_hash: z.string().optional(),
});
export const Cursor = z.object({ session_id: z.string(), offset: z.number().int().min(0) });
export const FinishArg = z.object({
  cursor: Cursor,
  commit: CommitInfo,
  content_hash: z.string().optional(),
});

export interface Session {
  id: string;
  chunks: Buffer[];
  offset: number;
  closed: boolean;
  finished: boolean;
}

export interface ListCursor {
  /** path_lower of the listed folder ('' for the root). */
  p: string;
  r: boolean;
  /** Change-log position once the snapshot is done. */
  s: number;
  /** Snapshot key and offset while paging through the initial listing. */
  k?: string;
  o?: number;
  /** Expiry epoch. */
  e: number;
  l: number;
}

export const DISALLOWED_NAMES = new Set([
  'desktop.ini',
  'thumbs.db',
  '.ds_store',
  'icon\r',
  '.dropbox',
  '.dropbox.attr',
]);

export function iso(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}

/** A 409 route error: `tags` is the chain of union tags, `error` the Stone-encoded union. */
export function routeError(tags: string[], error: unknown): HttpError {
  return new HttpError(409, {
    error_summary: `${tags.join('/')}/.${randomBytes(2).toString('hex')}`,
    error,
  });
}

export function lookupError(outer: string, tag: string): HttpError {
  return routeError([outer, tag], { '.tag': outer, [outer]: { '.tag': tag } });
}

export function writeConflict(outer: string, kind: 'file' | 'folder' | 'file_ancestor'): HttpError {
  return routeError([outer, 'conflict', kind], {
    '.tag': outer,
    [outer]: { '.tag': 'conflict', conflict: { '.tag': kind } },
  });
}

export function badRequest(endpoint: string, message: string): HttpError {
  return new HttpError(400, `Error in call to API function "${endpoint}": ${message}`);
}

/** Escape a JSON text for an HTTP header the way Dropbox does (non-ASCII as \uXXXX). */
export function headerSafeJson(value: unknown): string {
  return JSON.stringify(value).replace(
    /[\u007f-\uffff]/g,
    (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'),
  );
}
