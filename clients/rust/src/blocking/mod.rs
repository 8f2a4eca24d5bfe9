//! The blocking API (placeholder).
