'use strict';
// Loaded with `node --require` before one docs example: ioredis' default port becomes the test
// server's, $DOCS_TEST_PORT, so that the example's `new Redis()` reaches it unedited. ioredis
// is resolved from the example's directory, as the example's own `import Redis from 'ioredis'`
// is: one module instance, so the example sees the patched defaults.

const Redis = require(require.resolve('ioredis', { paths: [process.cwd()] }));

const port = Number(process.env.DOCS_TEST_PORT);
if (!Number.isInteger(port) || port <= 0) throw new Error('DOCS_TEST_PORT is not set');
Redis.defaultOptions.port = port;
