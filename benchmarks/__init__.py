"""Speed and memory benchmarks of the zoo (run `python -m benchmarks --help`)."""
