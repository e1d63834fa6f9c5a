"""What the launchers share: Slurm's environment, routes and ports, torchrun, stage files, processes."""
