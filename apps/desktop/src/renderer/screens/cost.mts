/**
 * Cost: this month's bill of the user's Weft storage (docs/cost.md) — so far and projected
 * to the month's end, split into storage, requests, transfer and egress — the whole
 * proxy's for comparison, and a small chart of the bytes held on each tier over 30 days.
 */
import type { CostParts, CostView, WeftClient } from '../../common/api.ts';
import { formatBytes, usd } from '../../common/format.ts';
import { Scope, h, renderInto } from '../dom.mts';

const SVG = 'http://www.w3.org/2000/svg';
const REFRESH_MS = 60_000;

function svg(tag: string, attrs: Record<string, string | number>): SVGElement {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  return el;
}

/** Two lines (filesystem tier, object tier) of bytes held over time. */
function chart(history: Extract<CostView, { available: true }>['history']): Node {
  const W = 320;
  const H = 120;
  const pad = 4;
  const last = history.at(-1);
  const label = last
    ? `Bytes held over the last ${history.length} hour${history.length === 1 ? '' : 's'} sampled: now ${formatBytes(last.fsBytes)} on the filesystem tier and ${formatBytes(last.objectsBytes)} on the object tier.`
    : 'No samples yet.';
  const root = svg('svg', {
    viewBox: `0 0 ${W} ${H}`,
    role: 'img',
    'aria-label': label,
    class: 'cost-chart',
    id: 'cost-chart',
  });
  root.append(svg('rect', { x: 0, y: 0, width: W, height: H, class: 'cost-chart-frame' }));
  if (history.length === 0) return root;
  const t0 = history[0]!.timeMs;
  const span = Math.max(1, (last?.timeMs ?? t0) - t0);
  const max = Math.max(1, ...history.map((p) => Math.max(p.fsBytes, p.objectsBytes)));
  const x = (t: number): number => (history.length === 1 ? W / 2 : pad + ((t - t0) / span) * (W - 2 * pad));
  const y = (b: number): number => H - pad - (b / max) * (H - 2 * pad);
  for (const [key, cls] of [
    ['fsBytes', 'cost-line-fs'],
    ['objectsBytes', 'cost-line-objects'],
  ] as const) {
    const points = history.map((p) => `${x(p.timeMs).toFixed(1)},${y(p[key]).toFixed(1)}`).join(' ');
    root.append(
      history.length === 1
        ? svg('circle', { cx: x(history[0]!.timeMs), cy: y(history[0]![key]), r: 3, class: cls })
        : svg('polyline', { points, class: cls, fill: 'none' }),
    );
  }
  return root;
}

function partsRows(p: CostParts): Node[] {
  return [
    h('dt', {}, 'Storage'),
    h('dd', {}, usd(p.storage)),
    h('dt', {}, 'Requests'),
    h('dd', {}, usd(p.requests)),
    h('dt', {}, 'Transfer'),
    h('dd', {}, usd(p.transfer)),
    h('dt', {}, 'Sent to your devices'),
    h('dd', {}, usd(p.egress)),
    ...(p.plan > 0 ? [h('dt', {}, 'Plan'), h('dd', {}, usd(p.plan))] : []),
  ];
}

export function costScreen(
  root: HTMLElement,
  api: WeftClient,
  scope: Scope,
  report: (m: string) => void,
): void {
  const body = h('div', { id: 'cost' }, h('p', {}, 'Loading…'));
  root.replaceChildren(h('h2', {}, 'Cost'), body);
  const load = (): void => {
    api.getCost({}).then(
      (c: CostView) =>
        renderInto(body, JSON.stringify(c), () => {
          if (!c.available) return h('p', { id: 'cost-unavailable' }, `Not available: ${c.reason}`);
          return [
            h(
              'section',
              { 'aria-labelledby': 'h-bill' },
              h('h3', { id: 'h-bill' }, `Your bill for ${c.month}`),
              h(
                'p',
                { class: 'cost-headline' },
                h('strong', { id: 'cost-so-far' }, usd(c.mine.soFar.total)),
                ' so far, ',
                h('strong', { id: 'cost-projected' }, usd(c.mine.projected.total)),
                ` projected for the month (${Math.round(c.elapsed * 100)} % elapsed).`,
              ),
              h('dl', { class: 'facts', id: 'cost-parts' }, ...partsRows(c.mine.soFar)),
              h(
                'p',
                { class: 'muted' },
                `${c.requests.put} uploads and listings, ${c.requests.get} reads, ${c.requests.delete} deletions; ${formatBytes(c.egressBytes)} sent to your devices. Priced as ${c.tables.fs} (filesystem tier) and ${c.tables.objects} (object tier).`,
              ),
            ),
            h(
              'section',
              { 'aria-labelledby': 'h-chart' },
              h('h3', { id: 'h-chart' }, 'Storage over time'),
              chart(c.history),
              h(
                'p',
                { class: 'cost-legend' },
                h('span', { class: 'cost-key cost-key-fs' }, 'Filesystem tier'),
                ' ',
                h('span', { class: 'cost-key cost-key-objects' }, 'Object tier'),
              ),
            ),
            h(
              'section',
              { 'aria-labelledby': 'h-proxy' },
              h('h3', { id: 'h-proxy' }, 'The whole server'),
              h(
                'p',
                { id: 'cost-proxy' },
                `${usd(c.proxy.soFar.total)} so far, ${usd(c.proxy.projected.total)} projected, for every user of this Weft server.`,
              ),
            ),
          ];
        }),
      (e: unknown) => report(e instanceof Error ? e.message : String(e)),
    );
  };
  load();
  const timer = setInterval(load, REFRESH_MS);
  scope.add(() => clearInterval(timer));
}
