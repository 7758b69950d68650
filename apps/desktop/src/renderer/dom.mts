/** Tiny DOM helpers: elements are built with properties, never from HTML strings. */

type Child = Node | string | false | null | undefined;
type Attrs = Record<string, string | number | boolean | undefined | ((e: Event) => void)>;

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Attrs = {},
  ...children: (Child | Child[])[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === false) continue;
    if (typeof v === 'function') el.addEventListener(k.replace(/^on/, ''), v);
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, String(v));
  }
  for (const c of children.flat()) {
    if (c === false || c === null || c === undefined) continue;
    el.append(typeof c === 'string' ? document.createTextNode(c) : c);
  }
  return el;
}

/** Replace a container's content only when the data it shows changed (keeps focus otherwise). */
export function renderInto(container: HTMLElement, key: string, build: () => Child | Child[]): void {
  if (container.dataset.key === key) return;
  const active = document.activeElement;
  const focusId = active instanceof HTMLElement && container.contains(active) ? active.id : '';
  container.dataset.key = key;
  const built = build();
  container.replaceChildren(
    ...(Array.isArray(built) ? built : [built]).filter((c): c is Node | string => !!c),
  );
  if (focusId) document.getElementById(focusId)?.focus();
}

export function timeText(ms: number): string {
  return new Date(ms).toLocaleString(undefined, { dateStyle: 'short', timeStyle: 'medium' });
}

/** Screens register their timers and listeners here; leaving the screen disposes them. */
export class Scope {
  private readonly items: (() => void)[] = [];
  add(fn: () => void): void {
    this.items.push(fn);
  }
  dispose(): void {
    for (const f of this.items.splice(0).reverse()) f();
  }
}
