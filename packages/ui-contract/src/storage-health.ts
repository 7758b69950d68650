/**
 * The Storage health screen (docs/desktop.md "Storage health"; issue #17): when the Weft
 * server keeps files on several backends (a redundant object tier), which backends there
 * are, their class and state (available / degraded / down since …), how the user's own
 * files stand, and what one more backend failure would do to them. Only the user's own
 * files are counted; backends are named by their id, never by bucket, path or price.
 */
import { z } from 'zod';

const Count = z.number().int().min(0);
const State = z.enum(['available', 'degraded', 'down']);

export const StorageHealthViewSchema = z.union([
  z.object({ available: z.literal(false), reason: z.string() }),
  z.object({
    available: z.literal(true),
    /** False: the server keeps files on one backend (nothing to show but that). */
    redundant: z.literal(false),
  }),
  z.object({
    available: z.literal(true),
    redundant: z.literal(true),
    /** For your files: down when one cannot be read now, degraded when any backend or file is not whole. */
    state: State,
    backends: z.array(
      z.object({
        id: z.string(),
        /** Performance-oriented (fast, holds small files) or cost-oriented (cheap, holds fragments). */
        class: z.enum(['performance', 'cost']),
        state: State,
        /** Down since / degraded since. */
        sinceMs: z.number().optional(),
      }),
    ),
    /** Your files kept on these backends, by how much redundancy they have left. */
    files: z.object({
      total: Count,
      whole: Count,
      reduced: Count,
      atMinimum: Count,
      unreadable: Count,
    }),
    /** For each backend that is up: what its failure, on top of today's, would do to your files. */
    ifFails: z.array(z.object({ backend: z.string(), unreadable: Count, atMinimum: Count })),
    lastScrubMs: z.number().optional(),
    checkedAtMs: z.number(),
  }),
]);
export type StorageHealthView = z.infer<typeof StorageHealthViewSchema>;

/** The UI API methods of this screen (merged into `api`). */
export const storageHealthMethods = {
  /** How your files stand on Weft storage's backends (GET /v1/storage/health). */
  getStorageHealth: { input: z.object({}).strict(), output: StorageHealthViewSchema },
} as const;
