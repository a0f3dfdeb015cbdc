// Shared Jest settings: swc compiles TypeScript (with decorator metadata for NestJS) and the
// @mission/* aliases resolve to the libraries' sources, as they do at run time.
const path = require('node:path');
const { compilerOptions } = require('../tsconfig.base.json');

const root = path.join(__dirname, '..');

const moduleNameMapper = Object.fromEntries(Object.entries(compilerOptions.paths).map(([alias, [target]]) => [`^${alias.replace(/[/]/g, '\\/')}$`, path.join(root, target)]));

module.exports = {
  rootDir: root,
  testEnvironment: 'node',
  moduleNameMapper,
  transform: {
    '^.+\\.(ts|js)$': [
      '@swc/jest',
      {
        jsc: {
          parser: { syntax: 'typescript', decorators: true },
          transform: { legacyDecorator: true, decoratorMetadata: true },
          target: 'es2022',
        },
        module: { type: 'commonjs' },
      },
    ],
  },
  // jose, stemmer, request-filtering-agent and eventsource-parser ship only ES modules; compile them to CommonJS like our own sources.
  // ESM-only packages (also when nested, e.g. @fastify/static's content-disposition) are compiled too.
  transformIgnorePatterns: ['^(?!.*/node_modules/(jose|stemmer|content-disposition|request-filtering-agent|eventsource-parser)/).*/node_modules/'],
  moduleFileExtensions: ['ts', 'js', 'json'],
};
