import nx from '@nx/eslint-plugin';
import tseslint from 'typescript-eslint';

export default [
  { ignores: ['**/node_modules/**', '**/dist/**', '.data/**', '.nx/**', 'coverage/**', 'tmp/**', 'bench/results/**', 'scripts/**', 'jest*.config.js'] },
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    plugins: { '@nx': nx },
    rules: {
      // Apps are thin entry points over their service library; libs never depend on apps or
      // services; a service never depends on another service. Only the composition root
      // (standalone) and the end-to-end tests wire several services together.
      '@nx/enforce-module-boundaries': [
        'error',
        {
          allow: [],
          banTransitiveDependencies: false,
          depConstraints: [
            { sourceTag: 'type:lib', onlyDependOnLibsWithTags: ['type:lib'] },
            { sourceTag: 'type:service', onlyDependOnLibsWithTags: ['type:lib'] },
            { sourceTag: 'type:app', onlyDependOnLibsWithTags: ['type:lib', 'type:service'] },
            { sourceTag: 'scope:gateway', onlyDependOnLibsWithTags: ['scope:shared', 'scope:gateway'] },
            { sourceTag: 'scope:mission', onlyDependOnLibsWithTags: ['scope:shared', 'scope:mission'] },
            { sourceTag: 'scope:brain', onlyDependOnLibsWithTags: ['scope:shared', 'scope:brain'] },
            { sourceTag: 'scope:hit', onlyDependOnLibsWithTags: ['scope:shared', 'scope:hit'] },
            { sourceTag: 'scope:idp', onlyDependOnLibsWithTags: ['scope:shared', 'scope:idp'] },
            { sourceTag: 'scope:notification', onlyDependOnLibsWithTags: ['scope:shared', 'scope:notification'] },
            { sourceTag: 'scope:console', onlyDependOnLibsWithTags: ['scope:shared'] },
            { sourceTag: 'type:composition', onlyDependOnLibsWithTags: ['type:lib', 'type:service'] },
            { sourceTag: 'type:e2e', onlyDependOnLibsWithTags: ['type:lib', 'type:service'] },
          ],
        },
      ],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_' }],
      // Type-aware rules for the bugs types can see: a promise nobody awaits (its rejection lost,
      // or a shutdown that does not wait), an async callback where a void one is expected, a
      // switch that misses a member of its union.
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/switch-exhaustiveness-check': ['error', { considerDefaultExhaustiveForUnions: true }],
    },
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
  },
  {
    files: ['**/*.spec.ts', '**/*.int-spec.ts', '**/*.e2e-spec.ts', 'test/**/*.ts', 'bench/**/*.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
  {
    files: ['**/*.cjs'],
    rules: { '@typescript-eslint/no-require-imports': 'off' },
    languageOptions: { sourceType: 'commonjs', globals: { require: 'readonly', module: 'writable', __dirname: 'readonly', process: 'readonly' } },
  },
];
