import { emptyFolderStatus, type FolderStatusDto } from '../src/common/api.ts';

export function status(patch: Partial<FolderStatusDto> = {}): FolderStatusDto {
  return { ...emptyFolderStatus('/home/a/Weft'), files: 3, ...patch };
}
