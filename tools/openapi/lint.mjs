#!/usr/bin/env node
// `npm run openapi:lint [file]`: lints an OpenAPI document (default libs/api-client/openapi.json)
// with Redocly's recommended rules. Prints every problem and exits 1 when there is any.
// (An ES module: @redocly/openapi-core is ESM-only, which Jest's CommonJS runtime cannot load.)

import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createConfig, lintFromString } from '@redocly/openapi-core';

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const file = process.argv[2] ?? path.join(root, 'libs', 'api-client', 'openapi.json');

const config = await createConfig({
  extends: ['recommended'],
  rules: {
    // Health, metrics and the OAuth metadata are public and take no input: they have no 4xx.
    'operation-4xx-response': 'off',
    // The service is not licensed for redistribution.
    'info-license': 'off',
  },
});
const problems = await lintFromString({ source: readFileSync(file, 'utf8'), absoluteRef: file, config });
for (const problem of problems) {
  process.stdout.write(`${problem.severity} ${problem.ruleId}: ${problem.message} at ${problem.location[0]?.pointer ?? '?'}\n`);
}
process.stdout.write(`${problems.length} problem(s) in ${path.relative(process.cwd(), file)}\n`);
process.exit(problems.length === 0 ? 0 : 1);
