/** Structured logs of every call: operation, path, duration and error code (pino-compatible logger). */
import { isProviderError } from '../errors.ts';
import type { Provider } from '../provider.ts';
import { type CallInfo, ForwardingProvider } from './forwarding.ts';

/** The subset of pino's Logger that the providers use. */
export interface ProviderLogger {
  debug(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
}

let nextCallId = 0;

export class LoggingProvider extends ForwardingProvider {
  constructor(
    inner: Provider,
    private readonly logger: ProviderLogger,
  ) {
    super(inner);
  }

  protected async call<T>(info: CallInfo, fn: () => Promise<T>): Promise<T> {
    const callId = ++nextCallId;
    const started = performance.now();
    try {
      const result = await fn();
      this.logger.debug(
        {
          provider: this.name,
          op: info.op,
          path: info.path,
          callId,
          ms: Math.round(performance.now() - started),
        },
        'provider call',
      );
      return result;
    } catch (error) {
      this.logger.warn(
        {
          provider: this.name,
          op: info.op,
          path: info.path,
          callId,
          ms: Math.round(performance.now() - started),
          code: isProviderError(error) ? error.code : 'Unclassified',
          err: error instanceof Error ? error.message : String(error),
        },
        'provider call failed',
      );
      throw error;
    }
  }
}

export function withLogging(p: Provider, logger: ProviderLogger): Provider {
  return new LoggingProvider(p, logger);
}
