// Runs the TypeScript sources directly: swc compiles each module on load (with decorator
// metadata, which NestJS needs) and resolves the @mission/* path aliases from tsconfig.json.
const path = require('node:path');

process.env.SWC_NODE_PROJECT ??= path.join(__dirname, '..', 'tsconfig.json');
require('@swc-node/register');
