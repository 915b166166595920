"""The application layer: what the ``dpnet`` command does with many runs.

Nothing below it (graphs ... runner, distributed) imports it. ``store`` keeps runs (one cache keyed
by code and arguments, locks, parallel execution), ``keys`` computes those keys, ``source`` says
where data comes from, ``report`` writes Markdown, CSV and PNG, ``config`` turns TOML files and
``key=value`` overrides into a run; ``sweep``, ``reproduce``, ``compare`` and ``audit`` are the
commands' logic.
"""
