//! Black-box integration tests: see `tests/`.
