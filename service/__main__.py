"""``python -m service`` is the same command as ``pr-review-agent``."""

import sys

from service.cli.main import main

sys.exit(main())
