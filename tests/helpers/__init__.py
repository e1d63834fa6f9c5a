"""Test helpers: namespace clusters, a real Slurm cluster, sysfs trees in the kernel's layout."""
