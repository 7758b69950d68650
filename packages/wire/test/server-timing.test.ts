import { describe, expect, it } from 'vitest';
import { formatServerTiming, parseServerTiming } from '../src/server-timing.ts';

describe('Server-Timing (the proxy’s own time on a request)', () => {
  it('round-trips a duration in milliseconds', () => {
    expect(formatServerTiming(12.3456789)).toBe('app;dur=12.346');
    expect(parseServerTiming(formatServerTiming(12.3456789))).toBeCloseTo(12.346, 6);
    expect(parseServerTiming(formatServerTiming(0))).toBe(0);
  });

  it('writes no negative, infinite or NaN duration', () => {
    for (const bad of [-1, Number.NaN, Number.POSITIVE_INFINITY])
      expect(formatServerTiming(bad)).toBe('app;dur=0');
  });

  it('finds the app metric among others (a load balancer’s, a CDN’s), in any place', () => {
    expect(parseServerTiming('cdn-cache;desc=HIT, edge;dur=4.5, app;dur=80;desc="ingest"')).toBe(80);
    expect(parseServerTiming('app;desc="x";dur=7')).toBe(7);
    expect(parseServerTiming('app ; dur = 9.5')).toBe(9.5);
    expect(parseServerTiming('app;DUR="3"')).toBe(3);
  });

  it('reads nothing from a missing, malformed or hostile header', () => {
    for (const h of [
      undefined,
      null,
      '',
      'edge;dur=4',
      'app',
      'app;desc=no-duration',
      'app;dur=',
      'app;dur=-5',
      'app;dur=1e309',
      'app;dur=Infinity',
      'app;dur=NaN',
      'app;dur=0x10',
      'application;dur=5',
    ])
      expect(parseServerTiming(h), String(h)).toBeUndefined();
  });
});
