"""``python -m tensordict``: the command line (see :mod:`tensordict.cli`)."""

from tensordict.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
