"""`python -m evaluators ...`: see evaluators/cli.py."""
import sys

from evaluators.cli import main

sys.exit(main())
