/**
 * JSON messages of the versions API (docs/formats/api.md "Versions and deleted files"): the
 * versions of a file the proxy keeps, the files deleted under a folder, restoring either
 * (a normal write: it produces a change in the feed) and downloading a given version.
 */
import { z } from 'zod/v4';
import { DirPath, EntryPath, Sha256 } from './api.ts';

const Ms = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);
const Size = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);
/** A kept version's id (positive); 0 names the current version in listings. */
export const VersionId = z.coerce.number().int().min(1).max(Number.MAX_SAFE_INTEGER);

export const VersionsQuery = z.object({ path: EntryPath });

export const FileVersion = z
  .object({
    /** 0 for the current version, else the kept version's id (pass it to restore or download). */
    id: z.number().int().min(0),
    current: z.boolean(),
    /** This version was deleted (the path held nothing after it). */
    deleted: z.boolean(),
    /** When this version was written on the server (null: not known, e.g. before the upgrade). */
    writtenMs: Ms.nullable(),
    /** The device that wrote it (null: not known or the server itself). */
    deviceName: z.string().nullable(),
    size: Size,
    sha256: Sha256,
    /** The file's modification time as the writing device gave it. */
    mtimeMs: Ms,
    /** When it stopped being current (null for the current version)… */
    replacedMs: Ms.nullable(),
    /** …and by which device. */
    replacedByName: z.string().nullable(),
    /** When the server forgets it (null for the current version). */
    expiresMs: Ms.nullable(),
  })
  .meta({ id: 'FileVersion' });
export type FileVersion = z.infer<typeof FileVersion>;

export const VersionsResponse = z
  .object({
    path: EntryPath,
    /** Newest first; the current version (if the path holds a file) comes first. */
    versions: z.array(FileVersion),
    /** How long replaced and deleted versions are kept (0: not at all). */
    retentionDays: z.number().min(0),
  })
  .meta({ id: 'VersionsResponse' });
export type VersionsResponse = z.infer<typeof VersionsResponse>;

export const DeletedQuery = z.object({
  /** The folder ('' = the whole namespace); files deleted anywhere below it are listed. */
  path: DirPath.default(''),
  limit: z.coerce.number().int().min(1).max(10_000).default(1000),
});

export const DeletedFile = z
  .object({
    path: EntryPath,
    /** The kept version the delete left (restore or download it by this id). */
    version: z.number().int().min(1),
    deletedMs: Ms,
    /** The device that deleted it (null: not known). */
    deletedByName: z.string().nullable(),
    size: Size,
    sha256: Sha256,
    mtimeMs: Ms,
    expiresMs: Ms,
  })
  .meta({ id: 'DeletedFile' });
export type DeletedFile = z.infer<typeof DeletedFile>;

export const DeletedResponse = z
  .object({
    path: DirPath,
    /** Path order. */
    files: z.array(DeletedFile),
    /** More deleted files than `limit` were found. */
    truncated: z.boolean(),
    retentionDays: z.number().min(0),
  })
  .meta({ id: 'DeletedResponse' });
export type DeletedResponse = z.infer<typeof DeletedResponse>;

export const RestoreRequest = z
  .object({
    path: EntryPath,
    version: VersionId,
  })
  .meta({ id: 'RestoreRequest' });
export type RestoreRequest = z.infer<typeof RestoreRequest>;

export const VersionContentQuery = z.object({ path: EntryPath, version: VersionId });
