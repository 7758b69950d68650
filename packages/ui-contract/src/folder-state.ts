/**
 * A synced folder's state, as the status line, the tray and Settings show it.
 *
 * `removed`: this computer was removed from its Weft account (its token revoked); it no longer syncs.
 * `full`: Weft storage refused an upload for lack of space; uploads wait (nothing is dropped),
 * downloads and deletes go on, and uploads resume by themselves once there is room.
 */
import { z } from 'zod';

export const FolderStateSchema = z.enum([
  'idle',
  'scanning',
  'syncing',
  'paused',
  'offline',
  'error',
  'removed',
  'full',
]);
export type FolderState = z.infer<typeof FolderStateSchema>;
