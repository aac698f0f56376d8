"""`bucketd` / `python -m server`: start the server (or run `bucketd inspect ...`)."""

from __future__ import annotations

import sys

from .config import ConfigError, parse_args

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "inspect":
        from .inspect_cli import main as inspect_main  # lazy: the CLI needs no server

        return inspect_main(args[1:])
    try:
        config = parse_args(args)
    except ConfigError as exc:
        print(f"bucketd: error: {exc}", file=sys.stderr)
        return 2
    # lazy: `bucketd inspect` and a bad command line start without loading the server
    from .app import run
    from .log import LOG

    LOG.configure(config.logpath, quiet=config.quiet, append=config.log_append)
    try:
        return run(config)
    except KeyboardInterrupt:
        return 0
    finally:
        LOG.close()


if __name__ == "__main__":
    sys.exit(main())
