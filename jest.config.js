// `npm test`: unit tests beside the code, then the embedded end-to-end suite through the gateway.
const preset = require('./tools/jest-preset.cjs');

module.exports = {
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
