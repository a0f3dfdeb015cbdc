/**
 * `npm run openapi:generate`: renders the gateway's OpenAPI document into
 * libs/api-client/openapi.json and its TypeScript types (openapi-typescript) into
 * libs/api-client/src/schema.ts. With `--check` it writes nothing and fails when either file is
 * not what it would write (the unit tests run it so).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { renderOpenApiDocument } from '@mission/service-gateway';
import { API_CLIENT_FILES, typesFromDocument } from './types';

async function main(): Promise<void> {
  const check = process.argv.includes('--check');
  const document = await renderOpenApiDocument();
  const files = [
    { file: API_CLIENT_FILES.document, content: document },
    { file: API_CLIENT_FILES.types, content: await typesFromDocument(document) },
  ];
  const relative = (file: string) => path.relative(process.cwd(), file);
  if (check) {
    const stale = files.filter(({ file, content }) => readFileSync(file, 'utf8') !== content).map(({ file }) => relative(file));
    if (stale.length > 0) {
      process.stderr.write(`out of date: ${stale.join(', ')}; run \`npm run openapi:generate\`\n`);
      process.exit(1);
    }
    process.stdout.write('the OpenAPI document and the client types are up to date\n');
    return;
  }
  for (const { file, content } of files) writeFileSync(file, content);
  process.stdout.write(`wrote ${files.map(({ file }) => relative(file)).join(' and ')}\n`);
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(1);
});
