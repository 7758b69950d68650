/**
 * The upload compression the agent chose reaches its status (issue #16: the bench prints it):
 * bundles sent deflated and raw, and the last choice; the DTO validates against the contract.
 */
import { FolderStatusSchema } from '@weft/ui-contract';
import { describe, expect, it } from 'vitest';
import { StatusModel } from '../src/status.ts';
import { toStatusDto } from '../src/ui-server/service.ts';

describe('upload compression in the status', () => {
  it('is absent before the first bundle', () => {
    const status = new StatusModel('/home/me/Weft');
    expect(FolderStatusSchema.parse(toStatusDto(status.get())).uploadCompression).toBeUndefined();
    status.dispose();
  });

  it('counts bundles sent deflated and raw and keeps the last choice', () => {
    const status = new StatusModel('/home/me/Weft');
    const seen: unknown[] = [];
    status.onChange((s) => seen.push(s.uploadCompression));
    status.bundleSent(true);
    status.bundleSent(true);
    status.bundleSent(false);
    expect(status.get().uploadCompression).toEqual({ deflated: 2, raw: 1, last: 'raw' });
    status.bundleSent(true);
    const dto = FolderStatusSchema.parse(toStatusDto(status.get()));
    expect(dto.uploadCompression).toEqual({ deflated: 3, raw: 1, last: 'deflate' });
    expect(seen).toHaveLength(4);
    status.dispose();
  });
});
