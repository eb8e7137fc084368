"""``python -m tensordict.demo``: see :mod:`tensordict.demo`."""

from tensordict.demo.main import main

if __name__ == "__main__":
    raise SystemExit(main())
