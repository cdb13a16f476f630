"""The ``torchneuron`` command: will a model port to Trainium, and will it learn the same?"""

import argparse
import importlib
import sys

# Each subcommand is a module here with a one-line docstring, `add_arguments(parser)` and
# `run(args) -> int` (the exit code).
SUBCOMMANDS = ("check", "parity", "coverage", "info", "estimate")


def main(argv=None):
    """Parses the command line and runs one subcommand; returns its exit code."""
    parser = argparse.ArgumentParser(prog="torchneuron", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in SUBCOMMANDS:
        module = importlib.import_module(f"torch_neuronx.cli._{name}")
        sub = commands.add_parser(name, help=module.__doc__, description=module.__doc__)
        module.add_arguments(sub)
        sub.set_defaults(run=module.run)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
