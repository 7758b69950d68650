/**
 * Several synced folders (docs/desktop.md "Several synced folders"): the main Weft folder,
 * whose server side is the whole of Weft storage, and folders added in Settings, each with
 * its own root there (`.weft/folders/<name>`). Removing a folder stops its syncing and
 * deletes nothing, on this computer or in Weft storage.
 */
import { z } from 'zod';
import { FolderStateSchema } from './folder-state.ts';

export const SyncedFolderSchema = z.object({
  /** 'main' for the main folder. */
  id: z.string(),
  /** Where it is on this computer. */
  path: z.string(),
  /** Its name in Weft storage ('' for the main folder). */
  name: z.string(),
  /** Where its files are in Weft storage ('' = the top). */
  remoteRoot: z.string(),
  primary: z.boolean(),
  state: FolderStateSchema,
  error: z.string().optional(),
  files: z.number().int().min(0),
  pendingOperations: z.number().int().min(0),
});
export type SyncedFolder = z.infer<typeof SyncedFolderSchema>;

export const SyncedFoldersSchema = z.object({ folders: z.array(SyncedFolderSchema) });
export type SyncedFolders = z.infer<typeof SyncedFoldersSchema>;

export const folderMethods = {
  /** The main folder first, then the added ones. */
  listFolders: { input: z.object({}).strict(), output: SyncedFoldersSchema },
  /**
   * Sync one more folder of this computer: an existing folder, not inside or around another
   * synced folder or Weft's own records. `name`: its name in Weft storage (default: the
   * folder's own); a device that adds a folder of the same name syncs it with this one.
   */
  addFolder: {
    input: z
      .object({ path: z.string().min(1).max(4096), name: z.string().min(1).max(200).optional() })
      .strict(),
    output: SyncedFoldersSchema,
  },
  /** Stop syncing a folder; nothing is deleted on this computer or in Weft storage. */
  removeFolder: { input: z.object({ id: z.string().min(1).max(64) }).strict(), output: SyncedFoldersSchema },
} as const;
