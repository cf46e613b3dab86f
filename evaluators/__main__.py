"""`python -m evaluators ...`: see evaluators/cli/."""

import sys

from evaluators.cli import main

sys.exit(main())
