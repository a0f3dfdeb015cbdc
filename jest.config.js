// `npm test`: unit tests beside the code and the embedded end-to-end suite through the gateway, side by side.
const os = require('node:os');
const preset = require('./tools/jest-preset.cjs');

module.exports = {
  // At least two workers (Jest would take one on two cores): the end-to-end suite, much of it
  // waiting on its all-in-one process, runs beside the unit files (tools/jest-sequencer.cjs).
  maxWorkers: Math.max(2, os.availableParallelism() - 1),
  testSequencer: '<rootDir>/tools/jest-sequencer.cjs',
  projects: [
    {
      ...preset,
      displayName: 'unit',
      testMatch: ['<rootDir>/apps/**/*.spec.ts', '<rootDir>/libs/**/*.spec.ts', '<rootDir>/tools/**/*.spec.ts', '<rootDir>/bench/**/*.spec.ts', '<rootDir>/test/unit/**/*.spec.ts'],
    },
    {
      ...preset,
      displayName: 'e2e',
      testMatch: ['<rootDir>/test/e2e/**/*.e2e-spec.ts'],
      testTimeout: 60_000,
    },
  ],
};
