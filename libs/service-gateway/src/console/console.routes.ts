import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import fastifyStatic from '@fastify/static';
import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import type { FastifyReply } from 'fastify';
import { CONSOLE_CLIENT_ID, CONSOLE_PATH, CONSOLE_SCOPES, consoleRedirectUri, consoleUrl } from '@mission/contracts';
import type { Logger } from '@mission/runtime';
import type { RouteAccessConfig } from '../auth/access';

/*
 * The approvals console: static files built by `npx nx run console:build` (tools/console/build.mjs)
 * into dist/console, served here as public routes, with its settings. Every data call the page
 * makes goes to the API with the user's own token; nothing here reads a token.
 */

/** Where `npm start` and the images put the built console (the repository's dist/console). */
export const DEFAULT_CONSOLE_DIR = path.resolve(__dirname, '..', '..', '..', '..', 'dist', 'console');

export interface ConsoleOptions {
  /** The built console: index.html, manifest.json and the files it names. */
  readonly dir: string;
}

interface Manifest {
  readonly script: string;
  readonly stylesheet: string;
}

const PUBLIC: RouteAccessConfig = { access: 'public' };
const ASSET_NAME = /^[A-Za-z0-9_-]+\.(js|css)$/;

/** The page's policy: its own script and style only, data from the gateway and tokens from the identity provider. */
export function consoleContentSecurityPolicy(publicUrl: string, issuer: string): string {
  const connect = [...new Set(["'self'", new URL(publicUrl).origin, new URL(issuer).origin])].join(' ');
  return [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data:",
    `connect-src ${connect}`,
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
}

function readManifest(dir: string): Manifest | undefined {
  try {
    const manifest = JSON.parse(readFileSync(path.join(dir, 'manifest.json'), 'utf8')) as Partial<Manifest>;
    if (typeof manifest.script !== 'string' || typeof manifest.stylesheet !== 'string') return undefined;
    if (![manifest.script, manifest.stylesheet, 'index.html'].every((name) => existsSync(path.join(dir, name)))) return undefined;
    return { script: manifest.script, stylesheet: manifest.stylesheet };
  } catch {
    return undefined;
  }
}

/**
 * Registers `/console/` (the page, also at `/console/callback` where sign-in returns), its
 * settings (`/console/config.json`) and its two hashed files. Without a built console the page
 * answers 503 saying how to build it.
 */
export async function registerConsole(
  app: NestFastifyApplication,
  options: { readonly console: ConsoleOptions; readonly publicUrl: string; readonly issuer: string; readonly logger: Logger },
): Promise<void> {
  const fastify = app.getHttpAdapter().getInstance();
  const { dir } = options.console;
  const manifest = readManifest(dir);
  const base = CONSOLE_PATH.replace(/\/$/, '');
  fastify.get(base, { config: PUBLIC }, (_request, reply) => reply.redirect(CONSOLE_PATH, 308));
  if (!manifest) {
    options.logger.warn({ dir }, 'The approvals console is not built (npx nx run console:build); /console/ answers 503');
    fastify.get(CONSOLE_PATH, { config: PUBLIC }, (_request, reply) =>
      reply
        .code(503)
        .header('cache-control', 'no-store')
        .type('text/plain; charset=utf-8')
        .send('The approvals console is not built on this server: run `npx nx run console:build`.\n'),
    );
    return;
  }
  await app.register(fastifyStatic as never, { root: dir, serve: false });
  const policy = consoleContentSecurityPolicy(options.publicUrl, options.issuer);
  const secure = (reply: FastifyReply): FastifyReply =>
    reply
      .header('content-security-policy', policy)
      .header('x-content-type-options', 'nosniff')
      .header('referrer-policy', 'no-referrer')
      .header('x-frame-options', 'DENY')
      .header('cross-origin-opener-policy', 'same-origin');
  const page = (_request: unknown, reply: FastifyReply) => secure(reply).header('cache-control', 'no-cache').sendFile('index.html', { cacheControl: false });
  fastify.get(CONSOLE_PATH, { config: PUBLIC }, page);
  fastify.get(`${CONSOLE_PATH}callback`, { config: PUBLIC }, page);
  const url = consoleUrl(options.publicUrl);
  const settings = {
    issuer: options.issuer,
    clientId: CONSOLE_CLIENT_ID,
    redirectUri: consoleRedirectUri(url),
    consoleUrl: url,
    apiUrl: options.publicUrl.replace(/\/$/, ''),
    scopes: CONSOLE_SCOPES,
  };
  fastify.get(`${CONSOLE_PATH}config.json`, { config: PUBLIC }, (_request, reply) => secure(reply).header('cache-control', 'no-cache').send(settings));
  const assets = new Set([manifest.script, manifest.stylesheet]);
  fastify.get<{ Params: { asset: string } }>(`${CONSOLE_PATH}:asset`, { config: PUBLIC }, (request, reply) => {
    const { asset } = request.params;
    if (!ASSET_NAME.test(asset) || !assets.has(asset)) return reply.code(404).header('cache-control', 'no-store').type('text/plain; charset=utf-8').send('Not found\n');
    // Named by their content's hash: a changed file is a new name, so a copy never goes stale.
    return secure(reply).header('cache-control', 'public, max-age=31536000, immutable').sendFile(asset, { cacheControl: false });
  });
}
