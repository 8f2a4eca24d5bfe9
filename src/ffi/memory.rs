//! Whether the server is over its `maxmemory`.
