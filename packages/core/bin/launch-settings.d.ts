// Types of bin/launch-settings.js (plain JavaScript: bin/ runs before any TypeScript loader).
export declare const AGENT_ENV: Readonly<Record<string, string>>;
export declare const AGENT_NODE_FLAGS: readonly string[];
export declare function shebang(): string;
