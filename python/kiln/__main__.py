"""`python -m kiln ARGS...` is the `kiln` CLI (docs/cli.md).

The package ships the CLI binary (kiln/bin/kiln) and this module execs it, rather than binding the
CLI's main into the extension: the process then is exactly the CLI (its exit codes, signals,
stdout buffering), and the commands that fork worker processes (test-onnx isolates crashing
tests that way) do not fork a Python interpreter.
"""
import os
import sys


def cli_path():
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "kiln")


def main():
    path = cli_path()
    if not os.access(path, os.X_OK):
        sys.exit(f"kiln: the CLI binary is missing from the installed package ({path}); reinstall kiln")
    os.execv(path, [path] + sys.argv[1:])


if __name__ == "__main__":
    main()
