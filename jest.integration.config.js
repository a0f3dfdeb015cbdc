// `npm run test:integration`: suites against real Kafka, PostgreSQL and Redis on 127.0.0.1.
// The global setup starts what is missing (Kafka from the project's own Maven fetch) and
// fails loudly when it cannot.
const preset = require('./tools/jest-preset.cjs');

module.exports = {
  ...preset,
  displayName: 'integration',
  testMatch: ['<rootDir>/apps/**/*.int-spec.ts', '<rootDir>/libs/**/*.int-spec.ts', '<rootDir>/test/integration/**/*.int-spec.ts'],
  globalSetup: '<rootDir>/test/integration/global-setup.ts',
  globalTeardown: '<rootDir>/test/integration/global-teardown.ts',
  testTimeout: 120_000,
  maxWorkers: 1,
};
