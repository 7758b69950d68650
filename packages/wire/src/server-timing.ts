/**
 * The proxy's own time on a request, as a `Server-Timing` response header (W3C Server Timing):
 * `app;dur=<ms>`, from the moment its handler had the whole request body to the moment the
 * response was handed to the socket. The agent subtracts it from the request's time to learn
 * what the link took (issue #16): the upload compression (CoCloud Eq. 3–4) compares the
 * compressor with the link, and a bundle request's time on loopback is almost all the
 * server's ingest, which compression does not shorten.
 */

/** The header, lower case (as Node and fetch give it). */
export const SERVER_TIMING_HEADER = 'server-timing';
/** The metric the proxy names its own time with. */
export const SERVER_TIMING_METRIC = 'app';

/** `app;dur=<ms>` for a duration in milliseconds (three decimals at most). */
export function formatServerTiming(ms: number): string {
  const dur = Number.isFinite(ms) && ms > 0 ? Math.round(ms * 1000) / 1000 : 0;
  return `${SERVER_TIMING_METRIC};dur=${dur}`;
}

/**
 * The `app` metric's duration in milliseconds from a Server-Timing header, or undefined when
 * there is none or it is malformed. Other metrics (a load balancer's or a CDN's, comma
 * separated, with their own parameters) are passed over; a negative, non-finite or missing
 * `dur` counts as none.
 */
export function parseServerTiming(header: string | null | undefined): number | undefined {
  if (!header) return undefined;
  for (const metric of header.split(',')) {
    const [name, ...params] = metric.split(';').map((s) => s.trim());
    if (name !== SERVER_TIMING_METRIC) continue;
    for (const p of params) {
      const eq = p.indexOf('=');
      if (eq < 0 || p.slice(0, eq).trim().toLowerCase() !== 'dur') continue;
      const raw = p
        .slice(eq + 1)
        .trim()
        .replace(/^"(.*)"$/, '$1');
      if (!/^\d+(\.\d+)?$/.test(raw)) return undefined;
      const ms = Number(raw);
      return Number.isFinite(ms) ? ms : undefined;
    }
    return undefined;
  }
  return undefined;
}
