"""The operator protocol's names under their former path; they live in :mod:`padconv_cli.ops`."""

from padconv_cli.ops import *  # noqa: F403
