/**
 * Version history and deleted files (docs/desktop.md "Version history and deleted files"):
 * what the History screen shows of the versions Weft storage keeps of a file, and of the
 * files deleted under a folder, with restore and "download this version".
 */
import { z } from 'zod';

/** A path in the synced folder, '/'-separated, as the activity list shows it. */
const FilePath = z.string().min(1).max(4096);
/**
 * Which synced folder the path is in: the name of a folder added in Settings (as the
 * activity list's `folder` shows it); absent or '' for the main folder.
 */
const SyncedFolderName = z.string().max(200).optional();

export const FileVersionViewSchema = z.object({
  /** 0: the current version; else pass it to restoreVersion / downloadVersion. */
  id: z.number().int().min(0),
  current: z.boolean(),
  /** The path held nothing after this version (it was deleted). */
  deleted: z.boolean(),
  /** When the version was saved to Weft storage (absent: not known). */
  savedMs: z.number().optional(),
  /** Which device saved it (absent: not known). */
  device: z.string().optional(),
  size: z.number().int().min(0),
  /** When it stopped being current, and when Weft storage forgets it. */
  replacedMs: z.number().optional(),
  expiresMs: z.number().optional(),
});
export type FileVersionView = z.infer<typeof FileVersionViewSchema>;

export const FileHistorySchema = z.discriminatedUnion('available', [
  z.object({ available: z.literal(false), reason: z.string() }),
  z.object({
    available: z.literal(true),
    path: z.string(),
    /** Newest first, the current version (if any) first of all. */
    versions: z.array(FileVersionViewSchema),
    retentionDays: z.number().min(0),
  }),
]);
export type FileHistory = z.infer<typeof FileHistorySchema>;

export const DeletedFileViewSchema = z.object({
  path: z.string(),
  version: z.number().int().min(1),
  deletedMs: z.number(),
  /** Which device deleted it (absent: not known). */
  device: z.string().optional(),
  size: z.number().int().min(0),
  expiresMs: z.number(),
});
export type DeletedFileView = z.infer<typeof DeletedFileViewSchema>;

export const DeletedFilesSchema = z.discriminatedUnion('available', [
  z.object({ available: z.literal(false), reason: z.string() }),
  z.object({
    available: z.literal(true),
    /** '' for the whole synced folder. */
    folder: z.string(),
    files: z.array(DeletedFileViewSchema),
    /** More were deleted than listed. */
    truncated: z.boolean(),
    retentionDays: z.number().min(0),
  }),
]);
export type DeletedFiles = z.infer<typeof DeletedFilesSchema>;

/** The UI API methods of this screen (merged into `api`). */
export const versionMethods = {
  /** The versions Weft storage keeps of a file. */
  fileHistory: {
    input: z.object({ path: FilePath, syncedFolder: SyncedFolderName }).strict(),
    output: FileHistorySchema,
  },
  /** Files deleted in a folder ('' = the whole synced folder) that can still be restored. */
  deletedFiles: {
    input: z.object({ folder: z.string().max(4096), syncedFolder: SyncedFolderName }).strict(),
    output: DeletedFilesSchema,
  },
  /** Make a kept version (or a deleted file) current again; every device gets it. */
  restoreVersion: {
    input: z
      .object({ path: FilePath, version: z.number().int().min(1), syncedFolder: SyncedFolderName })
      .strict(),
    output: z.object({ path: z.string(), message: z.string() }),
  },
  /** Save a copy of a kept version in the Downloads folder (the synced file is left alone). */
  downloadVersion: {
    input: z
      .object({ path: FilePath, version: z.number().int().min(1), syncedFolder: SyncedFolderName })
      .strict(),
    output: z.object({ savedTo: z.string(), message: z.string() }),
  },
} as const;
