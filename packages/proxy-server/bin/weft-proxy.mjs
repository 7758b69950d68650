#!/usr/bin/env node
// Runs the proxy from its TypeScript source (the workspace has no build step).
import { register } from 'tsx/esm/api';

register();
await import('../src/cli.ts');
