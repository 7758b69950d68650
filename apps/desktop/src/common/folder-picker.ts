/**
 * Settings' "Choose…" beside the folder path (Electron only; the browser UI types the path):
 * the preload asks on this channel, main shows the system's folder dialog and answers the
 * chosen path, or null when the person cancelled.
 */
export const PICK_FOLDER_CHANNEL = 'weft:pick-folder';

/** What main may answer: a path, or null. Anything else reads as null. */
export function pickedPath(raw: unknown): string | null {
  return typeof raw === 'string' && raw.length > 0 && raw.length <= 4096 ? raw : null;
}
