'use strict';
// A small Redis Cluster for the tests: 3 primaries (no replicas), each a server of
// support/server.js with the module, slots spread by redis-cli --cluster create.

const { execFile } = require('node:child_process');
const { promisify } = require('node:util');
const { startServer, raw, until } = require('./server');

const run = promisify(execFile);

async function startCluster(n = 3) {
  const nodes = [];
  try {
    for (let i = 0; i < n; i++) {
      nodes.push(await startServer(['--cluster-enabled', 'yes', '--cluster-node-timeout', '2000']));
    }
    const addrs = nodes.map((s) => `127.0.0.1:${s.port}`);
    await run('redis-cli', ['--cluster', 'create', ...addrs, '--cluster-replicas', '0', '--cluster-yes']);
    for (const s of nodes) {
      const r = raw(s.port);
      try {
        await until(async () => /cluster_state:ok/.test(await r.cluster('INFO')), `node ${s.port} ok`, 20000);
        await until(async () => (await r.cluster('SLOTS')).length === n, `node ${s.port} knows every primary`, 20000);
      } finally {
        r.disconnect();
      }
    }
  } catch (err) {
    await Promise.all(nodes.map((s) => s.stop()));
    throw err;
  }
  return {
    nodes,
    ports: nodes.map((s) => s.port),
    stop: () => Promise.all(nodes.map((s) => s.stop())),
  };
}

module.exports = { startCluster };
