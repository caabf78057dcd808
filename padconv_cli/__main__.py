"""``python -m padconv_cli`` runs the ``padconv`` command."""

from padconv_cli.cli.main import main

if __name__ == "__main__":
    main()
