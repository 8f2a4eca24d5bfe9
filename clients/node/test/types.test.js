'use strict';
// The TypeScript declarations (index.d.ts) compile against the real ioredis types and reject
// misuse: tsc --noEmit --strict on test/types-check.ts.

const test = require('node:test');
const assert = require('node:assert/strict');
const { execFile } = require('node:child_process');
const path = require('node:path');

test('index.d.ts type-checks a program using the whole API, strict', async () => {
  const tsc = require.resolve('typescript/bin/tsc');
  const args = ['--noEmit', '--strict', '--module', 'nodenext', '--moduleResolution', 'nodenext'];
  args.push('--target', 'es2022', '--types', 'node', path.join(__dirname, 'types-check.ts'));
  const out = await new Promise((resolve) => {
    execFile(process.execPath, [tsc, ...args], { cwd: path.join(__dirname, '..') }, (err, stdout, stderr) =>
      resolve({ code: err ? err.code : 0, text: stdout + stderr }),
    );
  });
  assert.equal(out.code, 0, out.text);
});
