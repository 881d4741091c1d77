"""Benchmark suites; each module registers its suites with `certify.bench.cases.suite`."""
