"""The argument parsers of the ``edgesync`` command line.

They import only the standard library (and ``edgesync._defaults``): building the parser
must not load the packages the commands use, so that ``edgesync agent`` starts without the
cloud side, on a full install as on an agent-only one. Each command imports its package
when it runs (``edgesync.cli``, ``edgesync._commands``).
"""
