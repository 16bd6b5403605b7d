"""The benchmark suites behind `fabric-jev bench`."""
