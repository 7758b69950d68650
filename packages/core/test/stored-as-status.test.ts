/**
 * Names stored under another local name reach the UI (issue #14): the status carries one
 * notice per entry, the service's DTO keeps it, and the contract's schema accepts it.
 */
import { FolderStatusSchema } from '@weft/ui-contract';
import { describe, expect, it } from 'vitest';
import { describeEncoding } from '../src/local-path.ts';
import { StatusModel } from '../src/status.ts';
import { toStatusDto } from '../src/ui-server/service.ts';

describe('stored-as notices in the status', () => {
  it('the DTO lists each renamed entry with its notice, and validates against the contract', () => {
    const status = new StatusModel('/home/me/Weft');
    const notice = describeEncoding('CON.txt', 'CON＿.txt', 'reserved-name', 'win32');
    expect(notice).toBe('Stored as "CON＿.txt" because Windows reserves the name "CON.txt"');
    status.update({ storedAs: [{ path: 'docs/CON.txt', localName: 'CON＿.txt', notice }] });
    const dto = FolderStatusSchema.parse(toStatusDto(status.get()));
    expect(dto.storedAs).toEqual([{ path: 'docs/CON.txt', localName: 'CON＿.txt', notice }]);
    status.dispose();
  });

  it('a folder with no renamed entries has no notices', () => {
    const status = new StatusModel('/home/me/Weft');
    const dto = FolderStatusSchema.parse(toStatusDto(status.get()));
    expect(dto.storedAs).toBeUndefined();
    status.dispose();
  });

  it('the notice says why on each platform', () => {
    expect(describeEncoding('a:b', 'a：b', 'reserved-char', 'win32')).toBe(
      'Stored as "a：b" because Windows cannot hold a character in "a:b"',
    );
    expect(describeEncoding('ctl\u0001', 'ctl␁', 'control', 'posix')).toBe(
      'Stored as "ctl␁" because control characters are not written into file names, as in "ctl\\u0001"',
    );
  });
});
