/**
 * Tests: the fsync and fdatasync calls every FileHandle of this process makes while `run`
 * runs (the write-ahead log's "one sync a batch" is counted this way). The prototype's two
 * methods are wrapped for the run and put back after it.
 */
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';

type Syncing = { sync: () => Promise<void>; datasync: () => Promise<void> };

export async function countSyncs(run: () => Promise<void>): Promise<number> {
  const fh = await fsp.open(os.tmpdir(), 'r');
  const proto = Object.getPrototypeOf(fh) as Syncing;
  await fh.close();
  const { sync, datasync } = proto;
  let n = 0;
  proto.sync = function (this: unknown) {
    n++;
    return sync.call(this);
  };
  proto.datasync = function (this: unknown) {
    n++;
    return datasync.call(this);
  };
  try {
    await run();
    return n;
  } finally {
    proto.sync = sync;
    proto.datasync = datasync;
  }
}
