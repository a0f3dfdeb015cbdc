import { z } from 'zod';

export class ConfigError extends Error {
  constructor(readonly problems: readonly string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

/**
 * Validates environment variables against `schema` once, at boot. Every bad variable is listed
 * in one error, named as in the environment, with the value's problem (never the value: it may
 * be a secret).
 */
export function loadConfig<S extends z.ZodType>(schema: S, env: NodeJS.ProcessEnv = process.env): z.output<S> {
  const present = Object.fromEntries(Object.entries(env).filter(([, value]) => value !== undefined && value !== ''));
  const result = schema.safeParse(present);
  if (result.success) return result.data;
  throw new ConfigError(result.error.issues.map((issue) => `${issue.path.map(String).join('.') || '(environment)'}: ${issue.message}`));
}

/** Reusable variable parsers. */
export const env = {
  port: (fallback: number) => z.coerce.number().int().min(0).max(65_535).default(fallback),
  url: (protocols: readonly string[]) =>
    z.url({ error: `must be a URL (${protocols.join(', ')})` }).refine((value) => protocols.includes(new URL(value).protocol.replace(/:$/, '')), {
      message: `must use ${protocols.join(' or ')}`,
    }),
  /** Comma-separated web origins (`scheme://host[:port]`), e.g. of browser-based clients. */
  origins: () =>
    z
      .string()
      .transform((value) =>
        value
          .split(',')
          .map((part) => part.trim())
          .filter(Boolean),
      )
      .refine((list) => list.every((entry) => URL.canParse(entry) && new URL(entry).origin === entry), {
        message: 'must be a comma-separated list of origins such as https://app.example.com (no path, no trailing slash)',
      }),
  /** Comma-separated host:port list. */
  hostPorts: () =>
    z
      .string()
      .transform((value) =>
        value
          .split(',')
          .map((part) => part.trim())
          .filter(Boolean),
      )
      .refine((list) => list.length > 0 && list.every((entry) => /^[^\s:]+:\d{1,5}$/.test(entry)), {
        message: 'must be a comma-separated list of host:port',
      }),
  positiveInt: (fallback: number) => z.coerce.number().int().min(1).default(fallback),
  logLevel: () => z.enum(['debug', 'info', 'warn', 'error']).default('info'),
};
