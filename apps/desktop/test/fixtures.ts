import type { FolderStatusDto } from '../src/common/api.ts';

export function status(patch: Partial<FolderStatusDto> = {}): FolderStatusDto {
  return {
    folder: '/home/a/Weft',
    state: 'idle',
    files: 3,
    pendingOperations: 0,
    transfers: [],
    recent: [],
    conflicts: [],
    savings: { deltaBytesSaved: 0, requestsSavedByBundling: 0, operationsEliminated: 0 },
    bytesUploaded: 0,
    bytesDownloaded: 0,
    warnings: [],
    ...patch,
  };
}
