"""nodewatch benchmarks: each figure is printed beside a reference measured in the same run."""
