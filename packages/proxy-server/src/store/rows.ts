/** Rows of the metadata tables as both stores read them (sqlite.ts, postgres.ts). */
import type { ChangeRecord, EntryInfo } from '@weft/wire';
import type { EntryRow } from './metadata.ts';

export interface EntrySql {
  path: string;
  kind: 'file' | 'dir';
  size: number;
  mtime_ms: number;
  revision: string;
  sha256: string | null;
  tier: 'small' | 'large' | null;
  fs_revision: string;
  written_ms?: number | null;
  device?: string | null;
}

export interface ChangeSql {
  seq: number;
  type: 'upsert' | 'delete' | 'move';
  path: string;
  from_path: string | null;
  entry: string | null;
  device: string | null;
  device_name: string | null;
}

export function toEntry(r: EntrySql): EntryRow {
  return {
    path: r.path,
    kind: r.kind,
    size: r.size,
    mtimeMs: r.mtime_ms,
    revision: r.revision,
    ...(r.sha256 !== null ? { sha256: r.sha256 } : {}),
    ...(r.tier !== null ? { tier: r.tier } : {}),
    fsRevision: r.fs_revision,
  };
}

export function toChange(r: ChangeSql): ChangeRecord {
  const device = {
    ...(r.device !== null ? { device: r.device } : {}),
    ...(r.device_name !== null ? { deviceName: r.device_name } : {}),
  };
  if (r.type === 'delete') return { seq: r.seq, type: 'delete', path: r.path, ...device };
  const entry = JSON.parse(r.entry ?? 'null') as EntryInfo;
  if (r.type === 'move')
    return { seq: r.seq, type: 'move', from: r.from_path ?? '', path: r.path, entry, ...device };
  return { seq: r.seq, type: 'upsert', path: r.path, entry, ...device };
}

/** The half-open key range of everything strictly below `dir` ('/' is 0x2F, '0' is 0x30). */
export function below(dir: string): [string, string] {
  return [dir + '/', dir + '0'];
}
