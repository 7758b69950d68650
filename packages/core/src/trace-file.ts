/**
 * WEFT_TRACE_FILE=<path>: the engine's trace (decisions, remote changes, uploads: the events
 * ctx.trace names) appended to a file as JSON lines, one per event, for debugging a run
 * that cannot be stepped through — a crash test's agent killed at random, say. Written
 * synchronously, so the last line before a kill -9 is on disk. Off unless the variable is set.
 */
import { appendFileSync } from 'node:fs';

/** `{ trace }` for engine options when WEFT_TRACE_FILE is set, else nothing. */
export function withTrace(file = process.env.WEFT_TRACE_FILE): {
  trace?: (event: string, detail: unknown) => void;
} {
  if (!file) return {};
  return {
    trace: (event, detail) => {
      try {
        appendFileSync(file, `${JSON.stringify({ t: Date.now(), pid: process.pid, event, detail })}\n`);
      } catch {
        // A trace that cannot be written is dropped: debugging aid, never a failure of sync.
      }
    },
  };
}
