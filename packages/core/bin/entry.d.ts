// Types of bin/entry.js (plain JavaScript: bin/ runs before any TypeScript loader).
export declare const BUNDLE: string;
export declare const BUNDLE_INPUTS: string;
export declare function bundleToRun(
  dir: string,
  env?: Record<string, string | undefined>,
): { bundle: string; reason?: undefined } | { bundle?: undefined; reason: string | undefined };
