import type { FolderStatusDto } from './api.ts';

/**
 * A folder's status before anything is known: idle, no files, nothing queued, moved or
 * saved. The engine starts from it, the agent shows it (offline) before enrolment, and
 * the desktop tests build their fixtures on it. The lists are typed empty so that the
 * result also fits the engine's own, narrower status type.
 */
export function emptyFolderStatus(folder: string) {
  return {
    folder,
    state: 'idle' as const,
    files: 0,
    pendingOperations: 0,
    transfers: [] as never[],
    recent: [] as never[],
    conflicts: [] as never[],
    savings: { deltaBytesSaved: 0, requestsSavedByBundling: 0, operationsEliminated: 0 },
    bytesUploaded: 0,
    bytesDownloaded: 0,
    warnings: [] as never[],
  } satisfies FolderStatusDto;
}
