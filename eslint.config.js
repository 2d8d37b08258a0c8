// Lint: typescript-eslint's type-checked recommendations, over the operator, its tests and its tooling.
// Formatting is Prettier's (.prettierrc.json); nothing here argues about layout.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', '.local/', 'charts/', 'bundle/', 'config/', 'hack/bins/', 'docs/'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: {
        // Config files and plain scripts sit outside tsconfig.json's include: typed with default options.
        projectService: { allowDefaultProject: ['*.js', '*.ts', 'hack/*.mjs'] },
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      // An async function without await keeps a promise-returning interface its callers rely on.
      '@typescript-eslint/require-await': 'off',
      // An object's other fields, taken by leaving one out with a rest pattern.
      '@typescript-eslint/no-unused-vars': ['error', { ignoreRestSiblings: true }],
    },
  },
  {
    // Tests read YAML and JSON fixtures as `any` and assert on them, and feed the code deliberately bad values
    // (non-Error rejections, rejecting callbacks) to prove it copes.
    files: ['test/**'],
    rules: {
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/prefer-promise-reject-errors': 'off',
      '@typescript-eslint/no-misused-promises': 'off',
    },
  },
  {
    // Plain scripts: Node's globals, no types to check.
    files: ['**/*.js', '**/*.mjs'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: { globals: { process: 'readonly', console: 'readonly' } },
  },
);
