"""msdb's version, in a module of its own so that any layer can import it downward (the
`msdb` package re-exports it as `msdb.__version__`; docs/architecture.md, "Which way imports
point"). It must equal `[project] version` in pyproject.toml (tests/test_version.py)."""

__version__ = "0.1.0"
