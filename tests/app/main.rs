//! Integration tests: the real router over HTTP on loopback, a fresh SQLite file per test.

mod helpers;
mod web;
mod workflow;
