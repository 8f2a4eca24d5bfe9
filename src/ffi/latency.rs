//! Long module work reported to Redis' latency monitor (`LATENCY LATEST`, `LATENCY HISTORY`).
