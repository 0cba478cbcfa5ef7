"""The bad-input corpus: tables of inputs that rltune must refuse with one clear message.

One module per kind (``study_files``, ``cli_flags``, ``python_api``,
``checkpoints``), each a list :data:`CASES` of :class:`harness.Case`;
``tests/test_bad_input.py`` runs them all, and ``benchmarks/bad_input_census.py``
counts the outcomes.
"""
