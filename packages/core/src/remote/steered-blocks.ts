/**
 * Where a large upload's blocks go (issue #18, HyCloud Eq. 7–8 steering). The server that
 * opens a transfer may name a less loaded instance (`TransferState.preferred`); the blocks
 * go there, with the same device token, only when the store already knows that instance as
 * up (ServerPool.steerable: never a URL an answer alone named). When it fails (cannot be
 * reached, or answers an error), the rest go to the agent's own instance, which is asked
 * once for the transfer's acknowledged ranges (the transfer is shared across instances):
 * a block already acknowledged is not sent again. The commit is a namespace op and always
 * goes to the agent's own instance.
 */
import type { ByteRange, TransferState } from '@weft/wire';
import { OfflineError, RemoteError } from './http-errors.ts';
import type { RemoteStore } from './remote-store.ts';

export class SteeredBlocks {
  private steer: string | undefined;
  private acked: Promise<readonly ByteRange[]> | undefined;
  /** Blocks the preferred instance acknowledged. */
  steeredBlocks = 0;

  constructor(
    private readonly store: RemoteStore,
    private readonly state: TransferState,
    private readonly onFallback?: (url: string, error: unknown) => void,
  ) {
    this.steer = store.putBlockAt && store.steeredUrl ? store.steeredUrl(state) : undefined;
  }

  /** The instance blocks go to now, when not the agent's own. */
  get steeredTo(): string | undefined {
    return this.steer;
  }

  /** Send one block covering `range`; resolves once an instance acknowledged it (or had it). */
  async put(range: ByteRange, frame: Uint8Array): Promise<void> {
    const id = this.state.transferId;
    const at = this.steer;
    if (at !== undefined && this.store.putBlockAt) {
      try {
        await this.store.putBlockAt(at, id, frame);
        this.steeredBlocks += 1;
        return;
      } catch (e) {
        if (!(e instanceof OfflineError) && !(e instanceof RemoteError)) throw e;
        if (this.steer === at) {
          this.steer = undefined;
          this.onFallback?.(at, e);
          this.acked = this.store.getTransfer(id).then(
            (s) => s?.received ?? [],
            () => [],
          );
        }
      }
    }
    if (this.acked) {
      const have = await this.acked;
      if (have.some((r) => r.offset <= range.offset && r.offset + r.length >= range.offset + range.length))
        return;
    }
    await this.store.putBlock(id, frame);
  }
}
