//! Integration tests: the real router over HTTP on loopback, a fresh SQLite file per test.

mod evidence;
mod helpers;
mod memory;
mod web;
mod workflow;
