'use strict';
// Loaded with `node --require` before one docs example: ioredis' default port becomes the test
// server's, $DOCS_TEST_PORT, so that the example's `new Redis()` reaches it unedited, and a
// sentinel asked at the default Sentinel address (localhost:26379) is the test's sentinel,
// $DOCS_TEST_SENTINEL_PORT. ioredis
// is resolved from the example's directory, as the example's own `import Redis from 'ioredis'`
// is: one module instance, so the example sees the patched defaults.

const Redis = require(require.resolve('ioredis', { paths: [process.cwd()] }));

const port = Number(process.env.DOCS_TEST_PORT);
if (!Number.isInteger(port) || port <= 0) throw new Error('DOCS_TEST_PORT is not set');
Redis.defaultOptions.port = port;

const sentinelPort = Number(process.env.DOCS_TEST_SENTINEL_PORT);
if (!Number.isInteger(sentinelPort) || sentinelPort <= 0) throw new Error('DOCS_TEST_SENTINEL_PORT is not set');
const connectors = require.resolve('ioredis/built/connectors/SentinelConnector', { paths: [process.cwd()] });
const SentinelConnector = require(connectors).default;
const connectToSentinel = SentinelConnector.prototype.connectToSentinel;
SentinelConnector.prototype.connectToSentinel = function (endpoint, options) {
  const host = endpoint.host || 'localhost';
  const aimed = (endpoint.port || 26379) === 26379 && (host === 'localhost' || host === '127.0.0.1');
  return connectToSentinel.call(this, aimed ? { ...endpoint, port: sentinelPort } : endpoint, options);
};
