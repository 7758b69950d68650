/**
 * Why a folder does not sync for now: the person paused it (until a time, or until resumed),
 * or a scan found a mass delete and waits for the person's answer (discovery/local.ts:
 * send the deletes, or restore the files). engine.ts asks `paused` before a pass and the
 * push asks it between requests.
 */
import type { SyncContext } from './context.ts';
import { restoreMassDelete } from './discovery/local.ts';
import type { PassState } from './pass.ts';

export class PauseGate {
  private until = 0;

  constructor(
    private readonly state: PassState,
    private readonly now: () => number,
  ) {}

  /** Paused by the person (until `untilMs`) or waiting for a mass-delete answer. */
  get paused(): boolean {
    return this.byPerson || this.state.massDeletePending;
  }

  /** Paused by the person (not a mass-delete question), the pause not over yet. */
  get byPerson(): boolean {
    if (this.until > 0 && this.now() >= this.until) this.until = 0;
    return this.until > 0;
  }

  pause(untilMs: number): void {
    this.until = untilMs;
  }

  resume(): void {
    this.until = 0;
  }

  /**
   * The person's answer to a mass delete: `delete` sends the queued deletes, `restore` drops
   * them and lists the server again to bring the files back. False: no question was waiting.
   */
  answerMassDelete(ctx: SyncContext, answer: 'delete' | 'restore'): boolean {
    if (!this.state.massDeletePending) return false;
    if (answer === 'restore') restoreMassDelete(ctx);
    this.state.massDeletePending = false;
    this.state.remoteDirty = true;
    return true;
  }
}
