/**
 * Path ↔ id cache for one provider root of an id-based cloud (Drive, OneDrive): the
 * adapters resolve paths to ids through it and keep it correct across their own moves and
 * deletes and across what their change feeds report.
 */
import { isWithin } from '../paths.ts';

export class IdPathIndex {
  private readonly byPath = new Map<string, { id: string; dir: boolean }>();
  private readonly byId = new Map<string, string>();
  /** The last path each id was seen at, kept after it is forgotten (for the change feed's deletes). */
  private readonly lastKnown = new Map<string, string>();

  get(path: string): { id: string; dir: boolean } | undefined {
    return this.byPath.get(path);
  }

  pathOf(id: string): string | undefined {
    return this.byId.get(id);
  }

  lastPathOf(id: string): string | undefined {
    return this.lastKnown.get(id);
  }

  set(path: string, id: string, dir: boolean): void {
    const old = this.byId.get(id);
    if (old !== undefined && old !== path) this.forget(old);
    const prev = this.byPath.get(path);
    if (prev && prev.id !== id) this.forget(path);
    this.byPath.set(path, { id, dir });
    this.byId.set(id, path);
    this.lastKnown.set(id, path);
  }

  /** Forget a path and everything cached below it. */
  forget(path: string): void {
    for (const [p, v] of this.byPath) {
      if (isWithin(p, path)) {
        this.byPath.delete(p);
        this.byId.delete(v.id);
      }
    }
  }

  /** After the feed reported a removal: drop what is left of the id. */
  drop(id: string): void {
    const p = this.byId.get(id);
    if (p !== undefined) this.forget(p);
    this.lastKnown.delete(id);
  }
}
