"""Benchmarks that ship with slm: retrieval quality (LoCoMo) and speed at scale."""
