"""What the launchers share: Slurm's environment, routes and ports, torchrun, stage files, processes.

This package exports nothing: each name is imported from the module it lives in, so a reader (and
import-linter) sees which part a caller depends on, and loading one part does not load all of them.
The modules: ``slurm`` (where we are), ``launchers`` (this node's place, from flags or any launcher),
``net`` (routes, ports, endpoints), ``torchrun`` (the plan, the launch, its outcome), ``stderr``
(torchrun's output), ``stages`` (each rank's stage file), ``procs`` (signals, process groups, private
dirs), ``rankenv`` (the settings each rank gets) and ``validate`` (ports, deadlines, numbers).
"""
