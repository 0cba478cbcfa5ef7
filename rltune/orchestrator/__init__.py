"""The orchestrator: trials and studies of rltune trainers, stopping, checkpoints and the ``rltune`` CLI.

Modules::

    cli           the ``rltune`` command (``train``, ``rollout``); ``main(argv) -> exit status``
    _trial        one trial of a trainer: trial directory, results, stop criteria, checkpoints
    _stop         Ray Tune style stop criteria (stop when any result key reaches its value)
    _train_file   ``rltune train -f FILE.yaml``: reading and validating a train file

Importing this package is cheap: the trainers (and torch) load when a command runs.
"""
