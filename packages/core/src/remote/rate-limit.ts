/**
 * A byte-rate limiter (token bucket in bytes) for the user's upload and download limits.
 * `take(n)` waits until n bytes may pass; bursts up to one second's worth.
 */
export class ByteRateLimiter {
  private tokens: number;
  private last = performance.now();

  constructor(readonly bytesPerSecond: number) {
    if (!(bytesPerSecond > 0)) throw new RangeError('bytesPerSecond must be > 0');
    this.tokens = bytesPerSecond;
  }

  async take(n: number, signal?: AbortSignal): Promise<void> {
    let remaining = n;
    while (remaining > 0) {
      const now = performance.now();
      this.tokens = Math.min(
        this.bytesPerSecond,
        this.tokens + ((now - this.last) / 1000) * this.bytesPerSecond,
      );
      this.last = now;
      const grant = Math.min(remaining, this.tokens);
      if (grant > 0) {
        this.tokens -= grant;
        remaining -= grant;
        continue;
      }
      if (signal?.aborted) throw signal.reason instanceof Error ? signal.reason : new Error('aborted');
      const wait = Math.min(
        1000,
        Math.ceil((Math.min(remaining, this.bytesPerSecond) / this.bytesPerSecond) * 1000),
      );
      await new Promise((r) => setTimeout(r, Math.max(1, wait)));
    }
  }

  /** Pass a stream through the limiter. */
  async *throttle(stream: AsyncIterable<Uint8Array>): AsyncIterable<Uint8Array> {
    for await (const chunk of stream) {
      await this.take(chunk.byteLength);
      yield chunk;
    }
  }
}
