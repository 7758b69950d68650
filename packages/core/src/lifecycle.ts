/** Disposables (VS Code's lifecycle pattern): everything that must be released has one. */
export interface Disposable {
  dispose(): void;
}

export function toDisposable(fn: () => void): Disposable {
  let done = false;
  return {
    dispose() {
      if (done) return;
      done = true;
      fn();
    },
  };
}

/** Holds disposables and releases them all, last added first. */
export class DisposableStore implements Disposable {
  private readonly items: Disposable[] = [];
  private disposed = false;

  add<T extends Disposable>(d: T): T {
    if (this.disposed) {
      d.dispose();
      return d;
    }
    this.items.push(d);
    return d;
  }

  get size(): number {
    return this.items.length;
  }

  dispose(): void {
    this.disposed = true;
    for (const d of this.items.splice(0).reverse()) d.dispose();
  }
}

/** A typed event: `on(listener)` returns a Disposable that removes the listener. */
export class Emitter<T> implements Disposable {
  private listeners = new Set<(value: T) => void>();

  on(listener: (value: T) => void): Disposable {
    this.listeners.add(listener);
    return toDisposable(() => this.listeners.delete(listener));
  }

  fire(value: T): void {
    for (const l of [...this.listeners]) l(value);
  }

  get listenerCount(): number {
    return this.listeners.size;
  }

  dispose(): void {
    this.listeners.clear();
  }
}
