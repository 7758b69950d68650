import { MemoryProvider } from '../src/adapters/memory.ts';
import { runProviderConformance } from '../src/conformance/index.ts';

runProviderConformance({
  name: 'memory',
  create: async () => new MemoryProvider(),
});
