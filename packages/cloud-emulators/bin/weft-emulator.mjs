#!/usr/bin/env node
// Runs the TypeScript CLI from source in this process (the workspace runs TypeScript from source).
import { register } from 'tsx/esm/api';

register();
await import('../src/cli.ts');
