/**
 * The UI API contract lives in its own package (@weft/ui-contract) so that the agent
 * (@weft/core) and the desktop app both depend on it and not on each other.
 */
export * from '@weft/ui-contract';
